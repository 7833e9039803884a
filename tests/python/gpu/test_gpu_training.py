"""A small Llama-style model (token embedding, four blocks of RMSNorm + SwiGLU MLP with
residuals, an LM head) trained for 300 steps on synthetic next-token data (sequences from a
fixed random bigram table), once in bf16 and once with every MLP Linear converted to kerneld's
blockwise FP8. Both curves go to $KD_GPU_OUT/loss_curves.json. The FP8 curve must stay within
3% of bf16's: the mean loss of the last 50 steps, and every 25-step window mean after step 50."""
import json
import os
import time

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gpu_util import out_dir, requires_cuda  # noqa: E402
from kerneld.torch import convert_to_float8_blockwise  # noqa: E402

pytestmark = requires_cuda
VOCAB, DIM, HIDDEN, BLOCKS = 2048, 1024, 2816, 4
BATCH, SEQ, STEPS = 16, 256, 300


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * \
            self.weight.to(x.dtype)


class MLPBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = RMSNorm(DIM)
        self.w1 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w3 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, DIM, bias=False)

    def forward(self, x):
        h = self.norm(x)
        return x + self.w2(nn.functional.silu(self.w1(h)) * self.w3(h))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.Sequential(*[MLPBlock() for _ in range(BLOCKS)])
        self.norm = RMSNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens):
        return self.head(self.norm(self.blocks(self.embed(tokens))))


def batches(seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    table = torch.randn(VOCAB, VOCAB, device="cuda", generator=g) * 3  # bigram logits
    probs = torch.softmax(table, dim=-1)
    for _ in range(STEPS):
        tokens = torch.empty(BATCH, SEQ + 1, dtype=torch.long, device="cuda")
        tokens[:, 0] = torch.randint(0, VOCAB, (BATCH,), device="cuda", generator=g)
        for t in range(SEQ):
            tokens[:, t + 1] = torch.multinomial(probs[tokens[:, t]], 1, generator=g).squeeze(1)
        yield tokens[:, :-1], tokens[:, 1:]


def train(fp8: bool, runtime):
    torch.manual_seed(0)
    model = Model().to(device="cuda", dtype=torch.bfloat16)
    if fp8:
        convert_to_float8_blockwise(model,
                                    module_filter_fn=lambda m, fqn: fqn.startswith("blocks"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    losses = []
    start = time.perf_counter()
    for inputs, targets in batches(seed=1):
        logits = model(inputs)
        loss = nn.functional.cross_entropy(logits.float().view(-1, VOCAB), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    losses = [float(v) for v in torch.stack(losses).cpu()]
    return losses, time.perf_counter() - start


def window_means(values, width):
    return [sum(values[i:i + width]) / width for i in range(0, len(values) - width + 1, width)]


def test_fp8_training_follows_bf16(gpu_runtime):
    bf16, bf16_s = train(False, gpu_runtime)
    fp8, fp8_s = train(True, gpu_runtime)
    record = {"steps": STEPS, "tokens_per_step": BATCH * SEQ, "model":
              {"vocab": VOCAB, "dim": DIM, "hidden": HIDDEN, "blocks": BLOCKS},
              "bf16": bf16, "kerneld_fp8": fp8, "seconds": {"bf16": bf16_s, "fp8": fp8_s},
              "device": torch.cuda.get_device_name()}
    with open(os.path.join(out_dir(), "loss_curves.json"), "w") as f:
        json.dump(record, f)
    assert bf16[-1] < 0.8 * bf16[0], "the bf16 run did not learn"
    last_bf16, last_fp8 = sum(bf16[-50:]) / 50, sum(fp8[-50:]) / 50
    assert abs(last_fp8 - last_bf16) <= 0.03 * last_bf16, (last_fp8, last_bf16)
    for i, (b, q) in enumerate(zip(window_means(bf16, 25), window_means(fp8, 25))):
        if i >= 2:
            assert abs(q - b) <= 0.03 * b, (i, q, b)
