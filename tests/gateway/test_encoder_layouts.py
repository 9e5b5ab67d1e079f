"""The search encoder reads what a model folder says of itself: BERT or
MPNet, mean or first-token pooling, query and document prompts.

Tiny random models written here (a few words, two layers), so these run
without the packaged model. The cross-check: an MPNet whose relative-position
bias is zero is a BERT with its position table shifted by the padding id + 1
and no token types, so both layouts must give the same vectors from the same
weights; a bias that is not zero must change them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

tokenizers = pytest.importorskip("tokenizers")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

from manager.gateway import semantic  # noqa: E402

WORDS = ["<s>", "<pad>", "</s>", "<unk>", "open", "the", "issue", "close", "q:", "d:"]
WIDTH, HEADS, LAYERS, INNER, BUCKETS = 8, 2, 2, 16, 32


def _tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tokenizer = Tokenizer(
        models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>")
    )
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    tokenizer.save(str(folder / "tokenizer.json"))


def _layers(rng: np.random.Generator, layout: dict[str, str]) -> dict[str, np.ndarray]:
    weights: dict[str, np.ndarray] = {}

    def dense(name: str, into: int, out: int) -> None:
        # Stored as torch keeps a Linear: (out, in).
        weights[name + ".weight"] = rng.normal(0, 0.3, (out, into)).astype(np.float32)
        weights[name + ".bias"] = rng.normal(0, 0.1, out).astype(np.float32)

    def norm(name: str) -> None:
        weights[name + ".weight"] = (1 + rng.normal(0, 0.1, WIDTH)).astype(np.float32)
        weights[name + ".bias"] = rng.normal(0, 0.1, WIDTH).astype(np.float32)

    for layer in range(LAYERS):
        at = f"encoder.layer.{layer}."
        for part in ("query", "key", "value", "out"):
            dense(at + layout[part], WIDTH, WIDTH)
        norm(at + layout["norm"])
        dense(at + "intermediate.dense", WIDTH, INNER)
        dense(at + "output.dense", INNER, WIDTH)
        norm(at + "output.LayerNorm")
    norm("embeddings.LayerNorm")
    return weights


def _relabel(
    weights: dict[str, np.ndarray], start: str, to: str
) -> dict[str, np.ndarray]:
    """The same layer weights under the other architecture's names."""
    pairs = [
        (semantic._LAYOUTS[start][part], semantic._LAYOUTS[to][part])
        for part in ("query", "key", "value", "out", "norm")
    ]
    renamed = {}
    for key, value in weights.items():
        for old, new in pairs:
            key = key.replace(f".{old}.", f".{new}.")
        renamed[key] = value
    return renamed


def _write(
    folder: Path,
    kind: str,
    weights: dict[str, np.ndarray],
    *,
    pooling_cls: bool = False,
    prompts: dict[str, str] | None = None,
) -> Path:
    from safetensors.numpy import save_file

    folder.mkdir(parents=True)
    config = {
        "model_type": kind,
        "hidden_size": WIDTH,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "layer_norm_eps": 1e-5,
        "pad_token_id": 1,
    }
    if kind == "mpnet":
        config["relative_attention_num_buckets"] = BUCKETS
    (folder / "config.json").write_text(json.dumps(config))
    save_file(
        {k: np.ascontiguousarray(v) for k, v in weights.items()},
        str(folder / "model.safetensors"),
    )
    _tokenizer(folder)
    if pooling_cls:
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(
            json.dumps(
                {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}
            )
        )
    if prompts is not None:
        (folder / "config_sentence_transformers.json").write_text(
            json.dumps({"prompts": prompts})
        )
    return folder


def _mpnet_weights(rng: np.random.Generator, *, bias: bool) -> dict[str, np.ndarray]:
    weights = _layers(rng, semantic._LAYOUTS["mpnet"])
    weights["embeddings.word_embeddings.weight"] = rng.normal(
        0, 1, (len(WORDS), WIDTH)
    ).astype(np.float32)
    weights["embeddings.position_embeddings.weight"] = rng.normal(
        0, 1, (40, WIDTH)
    ).astype(np.float32)
    table = rng.normal(0, 1, (BUCKETS, HEADS)) if bias else np.zeros((BUCKETS, HEADS))
    weights["encoder.relative_attention_bias.weight"] = table.astype(np.float32)
    return weights


def _as_bert(mpnet: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    bert = _relabel(
        {k: v for k, v in mpnet.items() if "relative" not in k}, "mpnet", "bert"
    )
    # MPNet numbers positions from its padding id + 1 (2); BERT from 0.
    bert["embeddings.position_embeddings.weight"] = mpnet[
        "embeddings.position_embeddings.weight"
    ][2:]
    bert["embeddings.token_type_embeddings.weight"] = np.zeros((2, WIDTH), np.float32)
    return bert


TEXTS = ["open the issue", "close the issue", "the issue open", "open"]


def test_relative_buckets_are_mpnets() -> None:
    # What transformers' MPNetEncoder.relative_position_bucket gives (2026-11,
    # transformers 5.24) for these distances, 32 buckets.
    distances = [-200, -128, -64, -20, -9, -8, -7, -1, 0, 1, 7, 8, 9, 20, 64, 128, 200]
    expected = [15, 15, 14, 10, 8, 8, 7, 1, 0, 17, 23, 24, 24, 26, 30, 31, 31]
    got = semantic._relative_buckets(np.array(distances), 32)
    assert got.tolist() == expected


def test_an_mpnet_without_position_bias_is_the_bert_it_equals(tmp_path: Path) -> None:
    mpnet = _mpnet_weights(np.random.default_rng(7), bias=False)
    as_mpnet = semantic.Encoder(_write(tmp_path / "mpnet", "mpnet", mpnet))
    as_bert = semantic.Encoder(_write(tmp_path / "bert", "bert", _as_bert(mpnet)))
    a, b = as_mpnet.embed(TEXTS), as_bert.embed(TEXTS)
    assert a.shape == (len(TEXTS), WIDTH)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.allclose(a, b, atol=1e-5)


def test_the_position_bias_counts(tmp_path: Path) -> None:
    with_bias = _mpnet_weights(np.random.default_rng(7), bias=True)
    without = {
        **with_bias,
        "encoder.relative_attention_bias.weight": np.zeros(
            (BUCKETS, HEADS), np.float32
        ),
    }
    a = semantic.Encoder(_write(tmp_path / "a", "mpnet", with_bias)).embed(TEXTS)
    b = semantic.Encoder(_write(tmp_path / "b", "mpnet", without)).embed(TEXTS)
    assert not np.allclose(a[:3], b[:3], atol=1e-3)


def test_first_token_pooling_when_the_folder_says_so(tmp_path: Path) -> None:
    weights = _as_bert(_mpnet_weights(np.random.default_rng(3), bias=False))
    mean = semantic.Encoder(_write(tmp_path / "mean", "bert", weights))
    first = semantic.Encoder(
        _write(tmp_path / "cls", "bert", weights, pooling_cls=True)
    )
    assert not np.allclose(mean.embed(TEXTS), first.embed(TEXTS), atol=1e-3)


def test_a_query_and_a_document_get_their_prompts(tmp_path: Path) -> None:
    weights = _as_bert(_mpnet_weights(np.random.default_rng(5), bias=False))
    plain = semantic.Encoder(_write(tmp_path / "plain", "bert", weights))
    prompted = semantic.Encoder(
        _write(
            tmp_path / "prompted",
            "bert",
            weights,
            prompts={"query": "q: ", "document": "d: "},
        )
    )
    query = prompted.embed(["open the issue"], remember=False)
    document = prompted.embed(["open the issue"])
    assert np.allclose(
        query, plain.embed(["q: open the issue"], remember=False), atol=1e-6
    )
    assert np.allclose(document, plain.embed(["d: open the issue"]), atol=1e-6)
    assert not np.allclose(query, document, atol=1e-3)


def test_an_architecture_it_cannot_run_is_refused_by_name(tmp_path: Path) -> None:
    folder = _write(
        tmp_path / "t5",
        "bert",
        _as_bert(_mpnet_weights(np.random.default_rng(1), bias=False)),
    )
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "t5"}))
    with pytest.raises(ValueError, match="'t5'"):
        semantic.Encoder(folder)
