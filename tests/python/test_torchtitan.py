"""kerneld.torchtitan on the CPU backend, with the torchtitan release the test environment pins
(scripts/install-deps.sh): torchtitan's Llama 3 debug model built with KerneldLinearConverter in
its `converters` list trains through the real daemon; its forward and gradients meet the SQNR
bounds below against the unconverted model; torchtitan's own activation checkpointing wraps its
converted blocks and torchtitan's per-block compile (fullgraph) compiles them; a state dict moves
between converted and unconverted models both ways. The import of kerneld.torchtitan itself
fails, naming the torchtitan version, if torchtitan's converter API changed under it.

FlexAttention, the debug model's attention, has no backward on the CPU (PyTorch refuses it), so
the models here use torchtitan's ScaledDotProductAttention as their inner attention; on a GPU
node the model is torchtitan's as it is.

SQNR bounds against the unconverted model (fp32, 6 layers, 2 x 256 tokens): the logits 40 dB,
every gradient 18 dB. Measured: 56.7 dB and 22.9 dB (layers.0.ffn_norm.weight, the smallest
gradient; the GEMM weights' are above 27 dB)."""
import logging

from conftest import require_torch

torch = require_torch(2, 6)
import torchtitan  # noqa: E402
from torchtitan.components.loss import cross_entropy_loss  # noqa: E402
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC  # noqa: E402
from torchtitan.models.common.attention import ScaledDotProductAttention  # noqa: E402
from torchtitan.models.common.linear import Linear  # noqa: E402
from torchtitan.models.llama3 import model_registry  # noqa: E402

import kerneld.torchtitan as kt  # noqa: E402  (fails naming the version on an unknown API)

VOCAB, BATCH, SEQ = 2048, 2, 256


def build(converters=None, seed=0, dtype=torch.float32):
    spec = model_registry("debugmodel", converters=converters)
    for layer in spec.model.layers:
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
    model = spec.model.build()
    torch.manual_seed(seed)
    model.init_states()
    return model.to(dtype)


def kerneld_converter(**kwargs):
    # The debug model's layers (256 wide) are far below the default rule's sizes.
    return [kt.KerneldLinearConverter.Config(auto_filter=False, model_compile_enabled=True,
                                             **kwargs)]


def batch(seed):
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=torch.Generator().manual_seed(seed))
    return tokens[:, :-1], tokens[:, 1:]


def loss_of(model, tokens, targets):
    return cross_entropy_loss(model(tokens), targets) / targets.numel()


def sqnr(ref, actual) -> float:
    ref, actual = ref.detach().double(), actual.detach().double()
    noise = (ref - actual).norm()
    return float("inf") if noise == 0 else float(20 * torch.log10(ref.norm() / noise))


def test_the_converter_takes_the_eligible_layers_and_names_the_rest(runtime, caplog):
    assert kt.TESTED_TORCHTITAN == torchtitan.__version__, (
        f"kerneld.torchtitan was written against torchtitan {kt.TESTED_TORCHTITAN}; the test "
        f"environment has {torchtitan.__version__}")
    model = build(kerneld_converter())
    kinds = {fqn: type(m).__name__ for fqn, m in model.named_modules() if isinstance(m, Linear)}
    assert sum(k == "KerneldLinear" for k in kinds.values()) == 30
    assert kinds["lm_head"] == "Linear"  # the output head stays in its dtype
    assert kinds["layers.0.attention.qkv_linear.wqkv"] == "KerneldLinear"
    filtered = build(kerneld_converter(filter_fqns=["attention.wo"]))
    assert type(filtered.layers["0"].attention.wo).__name__ == "Linear"
    # The measured default rule takes nothing this small.
    assert not any(type(m).__name__ == "KerneldLinear"
                   for m in build([kt.KerneldLinearConverter.Config()]).modules())
    # A layer the kernels cannot take stays in its dtype, named once in the log.
    with caplog.at_level(logging.WARNING, logger="kerneld.torchtitan"):
        root = kt.KerneldLinearConverter.Config(auto_filter=False).build().convert(
            Linear.Config(in_features=256, out_features=100))
    assert type(root) is Linear.Config
    assert [r.getMessage() for r in caplog.records if "stay" in r.getMessage()] == [
        "kerneld: 1 Linear layer(s) stay in their dtype: : out_features=100 is not a multiple "
        "of 128 (blockwise FP8 uses 1x128 and 128x128 blocks)"]


def test_forward_and_gradients_meet_the_sqnr_bounds(runtime):
    converted, reference = build(kerneld_converter()), build()
    tokens, targets = batch(1)
    out, ref = converted(tokens), reference(tokens)
    assert sqnr(ref, out) >= 40.0, sqnr(ref, out)
    cross_entropy_loss(out, targets).backward()
    cross_entropy_loss(ref, targets).backward()
    grads = dict(reference.named_parameters())
    worst = min((sqnr(grads[n].grad, p.grad), n) for n, p in converted.named_parameters())
    assert worst[0] >= 18.0, worst


def test_the_debug_model_trains_through_the_daemon(runtime):
    model = build(kerneld_converter())
    opt = torch.optim.AdamW(model.parameters(), lr=8e-4)
    tokens, targets = batch(2)
    losses = []
    for _ in range(8):
        loss = loss_of(model, tokens, targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss))
    assert losses[-1] < 0.8 * losses[0], losses


def test_torchtitan_activation_checkpointing_and_per_block_compile(runtime):
    import torch._dynamo
    tokens, targets = batch(3)
    plain = build(kerneld_converter())
    loss_of(plain, tokens, targets).backward()
    expected = {n: p.grad for n, p in plain.named_parameters()}
    for policy in (FullAC.Config(), SelectiveAC.Config()):
        model = build(kerneld_converter())
        policy.build().apply(model)
        loss_of(model, tokens, targets).backward()
        for name, p in model.named_parameters():
            name = name.replace("._checkpoint_wrapped_module", "")
            assert torch.equal(p.grad, expected[name]), (type(policy).__name__, name)
    # torchtitan's apply_compile: every TransformerBlock compiled with fullgraph=True, after AC.
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    model = build(kerneld_converter())
    FullAC.Config().build().apply(model)
    for block in model.layers.values():
        block.compile(fullgraph=True)
    loss = loss_of(model, tokens, targets)
    loss.backward()
    assert sum(torch._dynamo.utils.counters["graph_break"].values()) == 0
    worst = min(sqnr(expected[n.replace("._checkpoint_wrapped_module", "")
                              .replace("._orig_mod", "")], p.grad)
                for n, p in model.named_parameters())
    assert worst >= 18.0, worst
    torch._dynamo.reset()


def test_state_dicts_move_between_converted_and_unconverted_models(runtime):
    converted = build(kerneld_converter(), seed=4, dtype=torch.bfloat16)
    state = converted.state_dict()
    assert all(type(t) is torch.Tensor and t.dtype == torch.bfloat16 for t in state.values())
    plain = build(seed=5, dtype=torch.bfloat16)
    plain.load_state_dict(state)
    again = build(kerneld_converter(), seed=6, dtype=torch.bfloat16)
    again.load_state_dict(plain.state_dict())
    for name, t in again.state_dict().items():
        assert torch.equal(t, state[name]), name
    tokens, _ = batch(7)
    with torch.no_grad():
        assert torch.equal(again(tokens), converted(tokens))


def test_moe_experts_run_their_grouped_gemms_on_kerneld(runtime):
    """Qwen3's MoE debug model (two of its layers, 64 experts, top-8 routing), bf16: the expert
    GEMMs through KerneldGroupedExpertsConverter. Bounds against the unconverted model: logits
    30 dB, every expert weight's gradient 12 dB (measured 39 dB and 15 dB; the bf16 reference
    itself rounds every grouped GEMM's inputs and output to bf16)."""
    from torchtitan.models.qwen3 import model_registry as qwen3

    def build_moe(converters):
        spec = qwen3("debugmodel_moe", converters=converters)
        spec.model.layers = spec.model.layers[:2]
        for layer in spec.model.layers:
            layer.attention.inner_attention = ScaledDotProductAttention.Config()
        model = spec.model.build()
        torch.manual_seed(0)
        model.init_states()
        return model.to(torch.bfloat16)

    converted = build_moe([kt.KerneldGroupedExpertsConverter.Config(model_compile_enabled=True)])
    reference = build_moe(None)
    experts = [m for m in converted.modules() if type(m).__name__ == "KerneldGroupedExperts"]
    assert len(experts) == 2
    tokens, targets = batch(8)
    tokens, targets = tokens[:, :128], targets[:, :128]
    out, ref = converted(tokens), reference(tokens)
    assert sqnr(ref, out) >= 30.0, sqnr(ref, out)
    cross_entropy_loss(out, targets).backward()
    cross_entropy_loss(ref, targets).backward()
    grads = dict(reference.named_parameters())
    worst = min((sqnr(grads[n].grad, p.grad), n) for n, p in converted.named_parameters()
                if "experts" in n)
    assert worst[0] >= 12.0, worst
