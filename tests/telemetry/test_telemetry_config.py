"""`TelemetryConfig.from_env`: the standard `OTEL_*` variables and the `run` flags."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.resources import Resource

from manager.cli.commands import build_parser
from manager.telemetry import SignalConfig, TelemetryConfig
from manager.telemetry.export import build_resource

GRPC_DEFAULT = SignalConfig(("otlp",), "grpc", "http://localhost:4317")


@pytest.mark.parametrize(
    ("environ", "flags", "traces", "metrics"),
    [
        pytest.param({}, {}, GRPC_DEFAULT, GRPC_DEFAULT, id="defaults"),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"},
            {},
            SignalConfig(("otlp",), "grpc", "http://c:4317"),
            SignalConfig(("otlp",), "grpc", "http://c:4317"),
            id="endpoint",
        ),
        pytest.param(
            {
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/",
            },
            {},
            SignalConfig(("otlp",), "http/protobuf", "http://c:4318/v1/traces"),
            SignalConfig(("otlp",), "http/protobuf", "http://c:4318/v1/metrics"),
            id="http-base-gets-the-signal-path",
        ),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            {},
            SignalConfig(("otlp",), "http/protobuf", "http://localhost:4318/v1/traces"),
            SignalConfig(
                ("otlp",), "http/protobuf", "http://localhost:4318/v1/metrics"
            ),
            id="http-default-port",
        ),
        pytest.param(
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:9/custom",
                "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
            },
            {},
            SignalConfig(("otlp",), "grpc", "http://t:9/custom"),
            SignalConfig(("otlp",), "http/protobuf", "http://c:4317/v1/metrics"),
            id="per-signal-settings-win",
        ),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "console,otlp"},
            {},
            SignalConfig((), "grpc", "http://localhost:4317"),
            SignalConfig(("console", "otlp"), "grpc", "http://localhost:4317"),
            id="exporter-lists",
        ),
        pytest.param(
            {
                "OTEL_TRACES_EXPORTER": "none",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:9",
            },
            {"endpoint": "http://flag:4318", "protocol": "http/protobuf"},
            SignalConfig(("otlp",), "http/protobuf", "http://flag:4318/v1/traces"),
            SignalConfig(("otlp",), "http/protobuf", "http://flag:4318/v1/metrics"),
            id="flags-win-and-turn-otlp-on",
        ),
    ],
)
def test_exporters_protocols_and_endpoints_follow_the_standard_variables(
    environ: dict[str, str],
    flags: dict[str, str],
    traces: SignalConfig,
    metrics: SignalConfig,
) -> None:
    config = TelemetryConfig.from_env(environ, **flags)  # type: ignore[arg-type]
    assert config.enabled and config.warnings == ()
    assert (config.traces, config.metrics) == (traces, metrics)


@pytest.mark.parametrize(
    ("environ", "disable"),
    [
        pytest.param({"OTEL_SDK_DISABLED": "TRUE"}, False, id="variable"),
        pytest.param({}, True, id="flag"),
    ],
)
def test_telemetry_can_be_turned_off(environ: dict[str, str], disable: bool) -> None:
    config = TelemetryConfig.from_env(environ, disable=disable)
    assert not config.enabled and not config.active
    assert config.traces.exporters == config.metrics.exporters == ()


def test_no_exporter_at_all_is_not_active() -> None:
    config = TelemetryConfig.from_env(
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}
    )
    assert config.enabled and not config.active


@pytest.mark.parametrize(
    ("environ", "traces", "warning"),
    [
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "zipkin,otlp"},
            SignalConfig(("otlp",), "grpc", "http://localhost:4317"),
            "exporter 'zipkin' is not supported",
            id="unknown-exporter",
        ),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"},
            SignalConfig(("otlp",), "grpc", "http://localhost:4317"),
            "'thrift' is not supported (use grpc or http/protobuf); using grpc",
            id="unknown-protocol",
        ),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
            SignalConfig(("otlp",), "http/protobuf", "http://localhost:4318/v1/traces"),
            "http/json is not supported; using http/protobuf",
            id="http-json",
        ),
    ],
)
def test_bad_values_are_reported_and_replaced_never_fatal(
    environ: dict[str, str], traces: SignalConfig, warning: str
) -> None:
    config = TelemetryConfig.from_env(environ)
    assert config.traces == traces
    assert any(warning in w for w in config.warnings), config.warnings


@pytest.mark.parametrize(
    ("environ", "name"),
    [
        pytest.param({}, "mcp-manager", id="default"),
        pytest.param({"OTEL_SERVICE_NAME": "mm-prod"}, "mm-prod", id="service-name"),
        pytest.param(
            {"OTEL_RESOURCE_ATTRIBUTES": "team=ops,service.name=from%20attrs"},
            "from attrs",
            id="resource-attributes",
        ),
        pytest.param(
            {
                "OTEL_SERVICE_NAME": "wins",
                "OTEL_RESOURCE_ATTRIBUTES": "service.name=loses",
            },
            "wins",
            id="service-name-first",
        ),
    ],
)
def test_the_service_name_defaults_to_mcp_manager(
    environ: dict[str, str], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(key, raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    config = TelemetryConfig.from_env(environ)
    assert config.service_name == name
    resource: Resource = build_resource(config)
    assert resource.attributes["service.name"] == name
    assert resource.attributes["service.version"]


def test_run_and_stdio_take_the_telemetry_flags() -> None:
    for command in ("run", "stdio"):
        args = build_parser().parse_args(
            [command, "x.lua", "--otlp-endpoint", "http://c:4318"]
            + ["--otlp-protocol", "http/protobuf", "--no-telemetry"]
        )
        assert args.otlp_endpoint == "http://c:4318"
        assert args.otlp_protocol == "http/protobuf"
        assert args.no_telemetry is True
    defaults = build_parser().parse_args(["run"])
    assert (defaults.otlp_endpoint, defaults.otlp_protocol) == (None, None)
    assert defaults.no_telemetry is False


@pytest.mark.parametrize(
    ("environ", "sampler", "ratio", "warning"),
    [
        pytest.param({}, "parentbased_always_on", 1.0, "", id="default"),
        pytest.param(
            {"OTEL_TRACES_SAMPLER": "always_off"}, "always_off", 1.0, "", id="off"
        ),
        pytest.param(
            {
                "OTEL_TRACES_SAMPLER": "ParentBased_TraceIdRatio",
                "OTEL_TRACES_SAMPLER_ARG": "0.25",
            },
            "parentbased_traceidratio",
            0.25,
            "",
            id="ratio",
        ),
        pytest.param(
            {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
            "traceidratio",
            1.0,
            "OTEL_TRACES_SAMPLER_ARG: '2' is not a ratio from 0 to 1; using 1",
            id="bad-ratio",
        ),
        pytest.param(
            {"OTEL_TRACES_SAMPLER": "jaeger_remote"},
            "parentbased_always_on",
            1.0,
            "OTEL_TRACES_SAMPLER: 'jaeger_remote' is not supported",
            id="unknown",
        ),
    ],
)
def test_the_standard_sampler_variables_are_read(
    environ: dict[str, str], sampler: str, ratio: float, warning: str
) -> None:
    config = TelemetryConfig.from_env(environ)
    assert (config.sampler, config.sampler_ratio) == (sampler, ratio)
    if warning:
        assert any(warning in w for w in config.warnings), config.warnings
    else:
        assert config.warnings == ()
