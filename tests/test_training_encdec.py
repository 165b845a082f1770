"""Encoder-decoder training (T5, Whisper): the CLI runs without --ctx, the encoder is sized by --encoder-len (default
--seq; Whisper's encoder always sees max_source_positions frames), and the activation peak of one bf16 training step
is within 10 % of a measured one (tiny shrunk configs, random weights, CPU live-tensor tracker:
tests/training_measure.py)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import hfmem
from hfmem.cli import main
from hfmem.memory.training import TrainingSettings, estimate_training

ACTIVATION_KEYS = ("activations_layers", "activations_layer_weights", "activations_recompute", "activations_other",
                   "logits_loss", "backward_transient")


def _train_json(path, *args: str) -> dict:
    res = CliRunner().invoke(main, [str(path), "--train", "full", "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)["training"]["full"]


def test_t5_trains_without_ctx_and_sizes_the_encoder(stub_repo):
    path = stub_repo("google-t5/t5-small")
    res = CliRunner().invoke(main, [str(path), "--train", "all", "--encoder-len", "256"])
    assert res.exit_code == 0, res.output
    assert "encoder at 256 tokens, decoder at 2,048 tokens" in res.output
    short, long = (_train_json(path, "--seq", "128", "--encoder-len", str(n)) for n in (128, 512))
    assert short["settings"]["encoder_seq"] == 128 and long["settings"]["encoder_seq"] == 512
    # only the encoder-side terms grow: the decoder's logits do not
    assert long["components"]["activations_layers"] > short["components"]["activations_layers"]
    assert long["components"]["logits_loss"] == short["components"]["logits_loss"]
    default = _train_json(path, "--seq", "128")  # the encoder length defaults to --seq
    assert default["components"] == short["components"]
    assert _train_json(path, "--seq", "128", "--encoder-seq", "512")["components"] == long["components"]


def test_whisper_encoder_is_always_its_source_length(stub_repo):
    path = stub_repo("openai/whisper-large-v3")
    est = _train_json(path, "--seq", "448", "--encoder-len", "64")
    assert est["activation_terms"]["encoder_tokens"] == 1500  # WhisperEncoder refuses other mel lengths
    assert any("encoder at 1,500 tokens" in n for n in est["notes"])


def test_encoder_len_without_train_still_needs_ctx(stub_repo):
    res = CliRunner().invoke(main, [str(stub_repo("google-t5/t5-small")), "--encoder-len", "256"])
    assert res.exit_code == 2 and "needs --ctx" in res.output


# ---------------------------------------------------------------------------------------------------- measured



# Shrunk real configs (fixtures/configs/google-t5/t5-small, openai/whisper-large-v3): same blocks, tiny sizes.
# Dropout off: CPU dropout keeps its mask in the model dtype, CUDA's fused kernel a bool mask (what hfmem models).
TINY = {
    "t5": dict(d_model=128, d_ff=512, d_kv=32, num_heads=4, num_layers=2, vocab_size=1000, n_positions=512,
               relative_attention_num_buckets=32, feed_forward_proj="relu", dropout_rate=0.0, decoder_start_token_id=0,
               pad_token_id=0, eos_token_id=1),
    "whisper": dict(d_model=128, encoder_ffn_dim=512, decoder_ffn_dim=512, encoder_layers=2, decoder_layers=2,
                    encoder_attention_heads=4, decoder_attention_heads=4, num_mel_bins=80, max_source_positions=96,
                    max_target_positions=256, vocab_size=1000, activation_function="gelu", decoder_start_token_id=1,
                    pad_token_id=0, eos_token_id=2, bos_token_id=2),
}
# T5 runs eager here: under SDPA its relative position bias is a mask with a gradient, which CPU SDPA sends to the
# math kernel (fp32 copies and scores) while CUDA's memory-efficient kernel saves the mask (what hfmem models).
CASES = [("t5", "eager", 64, 64), ("t5", "eager", 160, 64), ("t5", "eager", 64, 160),
         ("whisper", "sdpa", 96, 32), ("whisper", "sdpa", 96, 100)]


@pytest.fixture(scope="module")
def tm(tmp_path_factory):
    """tests/training_measure.py, when torch and transformers are installed (the CLI tests above need neither)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import training_measure

    return training_measure


@pytest.fixture(scope="module")
def saved(tmp_path_factory, tm):
    root = tmp_path_factory.mktemp("encdec")
    made: dict = {}

    def make(model_type: str):
        if model_type not in made:
            tm.save(tm.build_seq2seq(model_type, TINY[model_type]), root / model_type)
            made[model_type] = hfmem.analyze(str(root / model_type))
        return made[model_type]

    return make


@pytest.mark.truth
@pytest.mark.parametrize("model_type, attn, enc, dec", CASES)
def test_encoder_decoder_activation_peak_within_10_percent(saved, tm, model_type, attn, enc, dec):
    report = saved(model_type)
    est = estimate_training(report, "full", TrainingSettings(seq=dec, encoder_seq=enc, precision="bf16", attn=attn))
    predicted = sum(est.activation_terms["components"].get(k, 0) for k in ACTIVATION_KEYS)
    measured = tm.seq2seq_activation_peak(tm.build_seq2seq(model_type, TINY[model_type], attn=attn), enc, dec)
    print(f"{model_type} {attn} enc={enc} dec={dec} predicted={predicted:,} measured={measured:,} ratio={predicted / measured:.3f}")
    assert abs(predicted / measured - 1) <= 0.10, (predicted, measured)
