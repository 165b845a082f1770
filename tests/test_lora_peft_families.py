"""LoRA trainable parameters equal peft's get_nb_trainable_parameters() on the families beyond the decoder-only ones of
tests/test_training_truth.py: Mamba-based models (where PEFT refuses out_proj and conv1d, so all-linear raises and
hfmem estimates the modules PEFT allows, saying so), encoder-decoder T5 and Whisper (self- and cross-attention,
PEFT's all-linear leaves Whisper's input convolutions alone). Tiny shrunk real configs, random weights."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.truth

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

import training_measure as tm  # noqa: E402

import hfmem  # noqa: E402
from hfmem.errors import UsageError  # noqa: E402
from hfmem.memory.training import TrainingSettings, estimate_training  # noqa: E402

# Shrunk from fixtures/configs/state-spaces/mamba-2.8b-hf, tiiuae Falcon-H1 (hybrid attention + Mamba2 + SwiGLU),
# google-t5/t5-small and openai/whisper-large-v3.
CAUSAL = {
    "mamba": dict(hidden_size=64, state_size=8, num_hidden_layers=2, vocab_size=500, intermediate_size=128, conv_kernel=4, expand=2),
    "falcon_h1": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=16, vocab_size=500, mamba_d_ssm=128, mamba_n_heads=8, mamba_d_head=16, mamba_d_state=8,
                      mamba_n_groups=1, mamba_d_conv=4, max_position_embeddings=512),
}
SEQ2SEQ = {
    "t5": dict(d_model=64, d_ff=128, d_kv=16, num_heads=4, num_layers=2, vocab_size=500, n_positions=512,
               decoder_start_token_id=0, pad_token_id=0, eos_token_id=1),
    "whisper": dict(d_model=64, encoder_ffn_dim=128, decoder_ffn_dim=128, encoder_layers=1, decoder_layers=1,
                    encoder_attention_heads=4, decoder_attention_heads=4, num_mel_bins=80, max_source_positions=32,
                    max_target_positions=64, vocab_size=500, decoder_start_token_id=1, pad_token_id=0, eos_token_id=2,
                    bos_token_id=2),
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora_families")
    made: dict = {}

    def make(model_type: str):
        if model_type not in made:
            if model_type in CAUSAL:
                builder = lambda: tm.build(model_type, CAUSAL[model_type], attn="eager")  # noqa: E731
            else:
                builder = lambda: tm.build_seq2seq(model_type, SEQ2SEQ[model_type])  # noqa: E731
            tm.save(builder(), root / model_type)
            made[model_type] = (hfmem.analyze(str(root / model_type)), builder)
        return made[model_type]

    return make


@pytest.mark.parametrize("model_type", ["mamba", "falcon_h1"])
def test_mamba_all_linear_is_what_peft_allows(saved, model_type):
    report, builder = saved(model_type)
    with pytest.raises(ValueError, match="incompatible with Mamba-based models"):
        tm.wrap_lora(builder(), "all-linear", rank=8)  # PEFT itself refuses all-linear here
    est = estimate_training(report, "lora", TrainingSettings(lora_rank=8))
    assert "out_proj" not in est.target_modules
    assert any("PEFT refuses out_proj" in n for n in est.notes)
    model = tm.wrap_lora(builder(), est.target_modules, rank=8)  # the list a user must give PEFT
    assert est.trainable_parameters == model.get_nb_trainable_parameters()[0]


@pytest.mark.parametrize("model_type", ["mamba", "falcon_h1"])
@pytest.mark.parametrize("refused", ["out_proj", "conv1d"])
def test_mamba_refused_targets_raise_like_peft(saved, model_type, refused):
    report, builder = saved(model_type)
    spec = ["in_proj", refused]
    with pytest.raises(ValueError, match="incompatible with Mamba-based models"):
        tm.wrap_lora(builder(), spec, rank=4)
    with pytest.raises(UsageError, match="incompatible with Mamba-based models"):
        estimate_training(report, "lora", TrainingSettings(lora_rank=4, lora_targets=",".join(spec)))


@pytest.mark.parametrize("model_type, spec", [("t5", "all-linear"), ("t5", "q,v"), ("whisper", "all-linear"), ("whisper", "q_proj,v_proj")])
def test_encoder_decoder_lora_equals_peft(saved, model_type, spec):
    report, builder = saved(model_type)
    est = estimate_training(report, "lora", TrainingSettings(lora_rank=8, lora_targets=spec, seq=32))
    model = tm.wrap_lora(builder(), spec if spec == "all-linear" else spec.split(","), rank=8)
    assert est.trainable_parameters == model.get_nb_trainable_parameters()[0]
