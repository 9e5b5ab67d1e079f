"""What to export and where: `TelemetryConfig.from_env(environ, ...)`.

The OpenTelemetry SDK reads `OTEL_TRACES_EXPORTER` and `OTEL_EXPORTER_OTLP_PROTOCOL`
only in its private auto-configuration, so the daemon reads the exporter choice,
protocol and endpoint itself, here, and hands the exporters an explicit endpoint.
Everything else (headers, timeouts, compression, certificates, `OTEL_BSP_*`,
`OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_RESOURCE_ATTRIBUTES`) the SDK reads on its own.

Precedence: `run` flags, then the signal-specific variable
(`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), then the general one, then the default
(gRPC to `http://localhost:4317`). A bad value never stops the daemon: it is
reported in `warnings` and the default is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal
from urllib.parse import unquote

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "GRPC",
    "HTTP_PROTOBUF",
    "SignalConfig",
    "TelemetryConfig",
]

DEFAULT_SERVICE_NAME: Final = "mcp-manager"
GRPC: Final = "grpc"
HTTP_PROTOBUF: Final = "http/protobuf"

_DEFAULT_ENDPOINTS: Final = {
    GRPC: "http://localhost:4317",
    HTTP_PROTOBUF: "http://localhost:4318",
}
_KNOWN_EXPORTERS: Final = ("otlp", "console")
DEFAULT_SAMPLER: Final = "parentbased_always_on"
SAMPLERS: Final = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)
"""The OpenTelemetry SDK's own `OTEL_TRACES_SAMPLER` values."""

Signal = Literal["traces", "metrics"]


@dataclass(frozen=True, slots=True)
class SignalConfig:
    """Exporters of one signal (traces or metrics).

    Attributes:
        exporters: Names among `otlp` and `console`; empty when off.
        protocol: OTLP protocol, `grpc` or `http/protobuf`.
        endpoint: Full OTLP endpoint (for HTTP including `/v1/traces` or
            `/v1/metrics`).
    """

    exporters: tuple[str, ...] = ("otlp",)
    protocol: str = GRPC
    endpoint: str = _DEFAULT_ENDPOINTS[GRPC]

    @property
    def otlp(self) -> bool:
        """Whether this signal goes to an OTLP endpoint."""
        return "otlp" in self.exporters


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """How the daemon exports traces and metrics.

    Attributes:
        enabled: False when `OTEL_SDK_DISABLED=true` or `--no-telemetry`.
        service_name: `service.name` of the resource.
        traces: Trace exporters.
        metrics: Metric exporters.
        warnings: Problems found in the environment (logged once at start).
        sampler: `OTEL_TRACES_SAMPLER`, one of `SAMPLERS`.
        sampler_ratio: `OTEL_TRACES_SAMPLER_ARG` of the two ratio samplers.
    """

    enabled: bool = True
    service_name: str = DEFAULT_SERVICE_NAME
    traces: SignalConfig = field(default_factory=SignalConfig)
    metrics: SignalConfig = field(
        default_factory=lambda: SignalConfig(endpoint=_DEFAULT_ENDPOINTS[GRPC])
    )
    warnings: tuple[str, ...] = ()
    sampler: str = DEFAULT_SAMPLER
    sampler_ratio: float = 1.0

    @property
    def active(self) -> bool:
        """Whether anything is exported at all."""
        return self.enabled and bool(self.traces.exporters or self.metrics.exporters)

    @classmethod
    def disabled(cls) -> TelemetryConfig:
        """No traces, no metrics."""
        off = SignalConfig(exporters=())
        return cls(enabled=False, traces=off, metrics=off)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str],
        *,
        endpoint: str | None = None,
        protocol: str | None = None,
        disable: bool = False,
    ) -> TelemetryConfig:
        """Read the standard `OTEL_*` variables, then apply the `run` flags.

        Args:
            environ: The environment (`os.environ`).
            endpoint: `--otlp-endpoint`: OTLP base URL for both signals; also
                turns the OTLP exporter on for both.
            protocol: `--otlp-protocol`: `grpc` or `http/protobuf`.
            disable: `--no-telemetry`.
        """
        if disable or _env(environ, "OTEL_SDK_DISABLED").lower() == "true":
            return cls.disabled()
        warnings: list[str] = []
        signals = {
            name: _signal(environ, name, endpoint, protocol, warnings)
            for name in ("traces", "metrics")
        }
        sampler, ratio = _sampler(environ, warnings)
        return cls(
            enabled=True,
            service_name=_service_name(environ),
            traces=signals["traces"],
            metrics=signals["metrics"],
            warnings=tuple(warnings),
            sampler=sampler,
            sampler_ratio=ratio,
        )


def _env(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name, "").strip()


def _signal(
    environ: Mapping[str, str],
    signal: Signal,
    flag_endpoint: str | None,
    flag_protocol: str | None,
    warnings: list[str],
) -> SignalConfig:
    upper = signal.upper()
    variable = f"OTEL_{upper}_EXPORTER"
    exporters: list[str] = []
    for name in (_env(environ, variable) or "otlp").split(","):
        name = name.strip().lower()
        if not name or name == "none" or name in exporters:
            continue
        if name in _KNOWN_EXPORTERS:
            exporters.append(name)
        else:
            warnings.append(
                f"{variable}: exporter {name!r} is not supported "
                "(use otlp, console or none); ignored"
            )
    if flag_endpoint and "otlp" not in exporters:
        exporters.insert(0, "otlp")

    protocol = _protocol(
        flag_protocol
        or _env(environ, f"OTEL_EXPORTER_OTLP_{upper}_PROTOCOL")
        or _env(environ, "OTEL_EXPORTER_OTLP_PROTOCOL")
        or GRPC,
        warnings,
    )
    specific = _env(environ, f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT")
    base = _env(environ, "OTEL_EXPORTER_OTLP_ENDPOINT")
    if flag_endpoint:
        specific, base = "", flag_endpoint
    if specific:
        endpoint = specific  # used as given, for HTTP too (OTel spec)
    else:
        endpoint = base or _DEFAULT_ENDPOINTS[protocol]
        if protocol == HTTP_PROTOBUF:
            endpoint = endpoint.rstrip("/") + f"/v1/{signal}"
    return SignalConfig(
        exporters=tuple(exporters), protocol=protocol, endpoint=endpoint
    )


def _sampler(environ: Mapping[str, str], warnings: list[str]) -> tuple[str, float]:
    """`OTEL_TRACES_SAMPLER` and its ratio (`OTEL_TRACES_SAMPLER_ARG`)."""
    name = _env(environ, "OTEL_TRACES_SAMPLER").lower() or DEFAULT_SAMPLER
    if name not in SAMPLERS:
        warnings.append(
            f"OTEL_TRACES_SAMPLER: {name!r} is not supported (use "
            f"{', '.join(SAMPLERS)}); using {DEFAULT_SAMPLER}"
        )
        return DEFAULT_SAMPLER, 1.0
    if not name.endswith("traceidratio"):
        return name, 1.0
    arg = _env(environ, "OTEL_TRACES_SAMPLER_ARG")
    try:
        ratio = float(arg) if arg else 1.0
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        warnings.append(
            f"OTEL_TRACES_SAMPLER_ARG: {arg!r} is not a ratio from 0 to 1; using 1"
        )
        ratio = 1.0
    return name, ratio


def _protocol(value: str, warnings: list[str]) -> str:
    value = value.strip().lower()
    if value in (GRPC, HTTP_PROTOBUF):
        return value
    if value == "http/json":
        warnings.append("OTLP protocol http/json is not supported; using http/protobuf")
        return HTTP_PROTOBUF
    warnings.append(
        f"OTLP protocol {value!r} is not supported (use grpc or http/protobuf); "
        "using grpc"
    )
    return GRPC


def _service_name(environ: Mapping[str, str]) -> str:
    explicit = _env(environ, "OTEL_SERVICE_NAME")
    if explicit:
        return explicit
    for pair in _env(environ, "OTEL_RESOURCE_ATTRIBUTES").split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip() == "service.name" and value.strip():
            return unquote(value.strip())
    return DEFAULT_SERVICE_NAME
