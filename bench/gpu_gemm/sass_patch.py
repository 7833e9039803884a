#!/usr/bin/env python3
"""Sets the SASS "yield" hint on the FP8 GEMM's promotion FFMAs, after compilation.

The promotion of the sm_90a GEMM (kernels/cuda/gemm/gemm_fp8_kernel.cu) is a run of kBlockN / 2
`FFMA acc, part, scale, acc` per thread right after each consumer loop's `WARPGROUP.DEPBAR` (the wait for
its wgmmas). Where ptxas left that run without yield hints, this tool sets the hint on some of
those FFMAs, so that the warp scheduler may switch warps between them, and clears the same
instructions' register-reuse flags (an operand kept in a reuse cache is not valid once another
warp has issued). It edits the bytes in place: the same size, so an executable that embeds the
cubin uncompressed (nvcc -compress-mode=none) or a .cubin file stays valid.

Encoding facts used (sm_90a, 128-bit instructions as two little-endian 64-bit words lo, hi),
checked against the cubins nvcc 13.0 writes and against `cuobjdump -sass` on the device (see
bench/RESULTS.md, "FFMA yield hints on the promotion, set after compilation (branch gemm9)"):
  lo & 0xfff           opcode: 0x223 FFMA R, R, R, R; 0x9c5 WARPGROUP.* (bit 47 of lo set:
                       WARPGROUP.DEPBAR, clear: WARPGROUP.ARRIVE)
  lo >> 12 & 0xf       predicate (7 = PT, unpredicated)
  lo >> 16 & 0xff      destination register; lo >> 24 & 0xff operand a; lo >> 32 & 0xff operand b
  hi & 0xff            operand c
  hi >> 41 & 0xf       stall count
  hi >> 45 & 1         yield hint, inverted: 0 = yield (no instruction with a reuse flag has it 0)
  hi >> 58 & 0xf       register reuse flags

Commands:
  scan FILE                    list the GEMM kernels' promotion runs and their hint bits
  patch IN OUT --pattern=P     write a patched copy of IN (executable or cubin); exit 2 when the
                               expected promotion runs are not found (a build step fails on it)
  same A B                     compare the code of every kernel in two objects or executables
                               (each built with -compress-mode=none): lists the kernels whose
                               instruction bytes differ; exit 1 if any does or the sets differ
                               (a refactor that must not change the SASS)
  verify ORIG.sass NEW.sass --report=R.json
                               compare `cuobjdump -sass` of the original and the patched file:
                               only the reported instructions changed, only in the yield and
                               reuse bits, and the disassembler calls them FFMA after a
                               WARPGROUP.DEPBAR

Patterns: all | alt0 | alt1 | every:K (yield on FFMA i of the run where i % K == K - 1; alt1 is
every:2, alt0 the even ones), each optionally with @N: only FFMAs at most N instructions after
the wait. Only runs without yield hints are patched unless --also-yielded is given (ptxas already
alternates the hint in the loops without turns). With --clear the pattern's FFMAs lose the hint
instead (their reuse flags stay), in every run: a way to measure what ptxas's hints are worth.
"""

import argparse
import json
import re
import struct
import sys

EM_CUDA = 190
OP_FFMA_RRR = 0x223
OP_WARPGROUP = 0x9C5
DEPBAR_BIT = 1 << 47
YIELD_BIT = 1 << 45  # in hi; 0 = yield
REUSE_MASK = 0xF << 58  # in hi
PATCH_MASK = YIELD_BIT | REUSE_MASK
MAX_RUN = 400  # instructions searched after a wait
KERNEL_RE = re.compile(r"GemmFp8KernelILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E")


class PatchError(Exception):
    pass


def find_cubins(data):
    """Offsets of the sm_xx ELF images in `data` (a cubin itself or a host file embedding them)."""
    found = []
    pos = data.find(b"\x7fELF")
    while pos >= 0:
        if pos + 64 <= len(data) and data[pos + 4] == 2 and data[pos + 5] == 1:
            machine = struct.unpack_from("<H", data, pos + 18)[0]
            shoff = struct.unpack_from("<Q", data, pos + 0x28)[0]
            shentsize, shnum = struct.unpack_from("<HH", data, pos + 0x3A)
            if (machine == EM_CUDA and shentsize == 64 and
                    pos + shoff + shnum * 64 <= len(data)):
                found.append(pos)
        pos = data.find(b"\x7fELF", pos + 1)
    return found


def text_sections(data, base):
    """(name, file offset, size) of each .text.<function> section of the ELF at `base`."""
    shoff = struct.unpack_from("<Q", data, base + 0x28)[0]
    shnum, shstrndx = struct.unpack_from("<HH", data, base + 0x3C)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, base + shoff + 64 * i) for i in range(shnum)]
    strtab = base + secs[shstrndx][4]
    out = []
    for s in secs:
        name_end = data.index(b"\0", strtab + s[0])
        name = data[strtab + s[0]:name_end].decode("ascii", "replace")
        if name.startswith(".text.") and s[1] == 1:  # SHT_PROGBITS
            if base + s[4] + s[5] > len(data) or s[5] % 16:
                raise PatchError(f"section {name} lies outside the file or is not 16-byte code")
            out.append((name[len(".text."):], base + s[4], s[5]))
    return out


def decode(data, off, size):
    return [struct.unpack_from("<QQ", data, off + k) for k in range(0, size, 16)]


def is_promotion_ffma(lo, hi):
    # Unpredicated FFMA R, R, R, R. (Not always acc = part * scale + acc in the same register:
    # ptxas renames some accumulators across the promotion of the 128-row loop.)
    return lo & 0xFFF == OP_FFMA_RRR and (lo >> 12) & 0xF == 7


def promotion_runs(ins):
    """[(wait index, [FFMA indices])] for each WARPGROUP.DEPBAR followed by promotion FFMAs
    before the next WARPGROUP instruction."""
    runs = []
    for i, (lo, _) in enumerate(ins):
        if lo & 0xFFF != OP_WARPGROUP or not lo & DEPBAR_BIT:
            continue
        ffma = []
        for j in range(i + 1, min(i + 1 + MAX_RUN, len(ins))):
            lo2, hi2 = ins[j]
            if lo2 & 0xFFF == OP_WARPGROUP:
                break
            if is_promotion_ffma(lo2, hi2):
                ffma.append(j)
        if ffma:
            runs.append((i, ffma))
    return runs


def parse_pattern(spec):
    m = re.fullmatch(r"(all|alt0|alt1|every:(\d+))(?:@(\d+))?", spec)
    if not m:
        raise PatchError(f"pattern {spec!r} is not all, alt0, alt1 or every:K, with optional @N")
    kind, every, within = m.group(1), m.group(2), m.group(3)
    within = int(within) if within else None
    if kind == "all":
        pick = lambda i: True
    elif kind == "alt0":
        pick = lambda i: i % 2 == 0
    elif kind == "alt1":
        pick = lambda i: i % 2 == 1
    else:
        k = int(every)
        if k < 1:
            raise PatchError("every:K needs K >= 1")
        pick = lambda i: i % k == k - 1
    return pick, within


def analyse(data, kernel_filter):
    """Yields (cubin offset, function, text offset, instructions, runs, expected FFMAs)."""
    cubins = find_cubins(data)
    for base in cubins:
        for name, off, size in text_sections(data, base):
            if kernel_filter not in name:
                continue
            m = KERNEL_RE.search(name)
            expected = int(m.group(2)) // 2 if m else None  # kBlockN / 2 accumulators
            ins = decode(data, off, size)
            yield base, name, off, ins, promotion_runs(ins), expected


def yielding(hi):
    return not hi & YIELD_BIT


def cmd_scan(args):
    data = open(args.file, "rb").read()
    for base, name, off, ins, runs, expected in analyse(data, args.kernel):
        m = KERNEL_RE.search(name)
        tag = "x".join(m.groups()) if m else name
        print(f"cubin@{base:#x} {tag}: {len(ins)} instructions, {len(runs)} promotion runs "
              f"(expected {expected} FFMAs each)")
        for wait, ffma in runs:
            bits = "".join("Y" if yielding(ins[j][1]) else "." for j in ffma)
            reuse = sum(1 for j in ffma if ins[j][1] & REUSE_MASK)
            print(f"  wait @{16 * wait:#07x}  {len(ffma)} FFMA over {ffma[-1] - wait} "
                  f"instructions, reuse on {reuse}, yield: {bits}")
    return 0


def plan(data, kernel_filter, pattern, also_yielded, clear=False):
    pick, within = parse_pattern(pattern)
    edits = []  # (file offset of hi, old hi, new hi, record)
    kernels = 0
    for base, name, off, ins, runs, expected in analyse(data, kernel_filter):
        kernels += 1
        if not runs:
            raise PatchError(f"{name}: no WARPGROUP.DEPBAR followed by promotion FFMAs")
        for wait, ffma in runs:
            if expected is not None and len(ffma) != expected:
                raise PatchError(f"{name}: the run after the wait at {16 * wait:#x} has "
                                 f"{len(ffma)} FFMAs, expected {expected}")
            already = sum(1 for j in ffma if yielding(ins[j][1]))
            if already * 10 > len(ffma) and not also_yielded and not clear:
                continue  # ptxas interleaved this run itself
            for i, j in enumerate(ffma):
                if within is not None and j - wait > within:
                    continue
                lo, hi = ins[j]
                if clear:
                    # --clear: take the hint off (the reuse flags stay as ptxas set them).
                    if not pick(i) or not yielding(hi):
                        continue
                    new_hi = hi | YIELD_BIT
                elif not pick(i) or yielding(hi):
                    continue
                else:
                    new_hi = (hi & ~REUSE_MASK) & ~YIELD_BIT
                edits.append((off + 16 * j + 8, hi, new_hi, {
                    "cubin": base, "function": name, "address": 16 * j, "wait": 16 * wait,
                    "index_in_run": i, "old_hi": f"{hi:#018x}", "new_hi": f"{new_hi:#018x}"}))
    if kernels == 0:
        raise PatchError(f"no kernel matching {kernel_filter!r} in an embedded cubin (was the "
                         "fatbin compressed? build with -compress-mode=none)")
    return edits


def cmd_patch(args):
    data = bytearray(open(args.input, "rb").read())
    edits = plan(data, args.kernel, args.pattern, args.also_yielded, args.clear)
    if not edits and not args.allow_empty:
        raise PatchError("the pattern selects no instruction")
    for pos, old, new, _ in edits:
        if struct.unpack_from("<Q", data, pos)[0] != old:
            raise PatchError(f"bytes at {pos:#x} changed under the plan")
        struct.pack_into("<Q", data, pos, new)
    with open(args.output, "wb") as f:
        f.write(data)
    functions = sorted({e[3]["function"] for e in edits})
    summary = {"input": args.input, "output": args.output, "pattern": args.pattern,
               "changed": len(edits), "functions": functions,
               "edits": [e[3] for e in edits]}
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=1)
    what = "cleared of" if args.clear else "given"
    print(f"{args.output}: pattern {args.pattern}: {len(edits)} FFMAs {what} the yield hint in "
          f"{len(functions)} kernels")
    return 0


def code_by_kernel(path, kernel_filter):
    data = open(path, "rb").read()
    out = {}
    for base in find_cubins(data):
        for name, off, size in text_sections(data, base):
            if kernel_filter in name:
                out[name] = data[off:off + size]
    return out


def cmd_same(args):
    a = code_by_kernel(args.a, args.kernel)
    b = code_by_kernel(args.b, args.kernel)
    if not a:
        raise PatchError(f"no kernel matching {args.kernel!r} in {args.a} (compressed fatbin?)")
    differ = sorted(k for k in a if k in b and a[k] != b[k])
    only = sorted(set(a) ^ set(b))
    for k in differ:
        print(f"differs: {k} ({len(a[k]) // 16} / {len(b[k]) // 16} instructions)")
    for k in only:
        print(f"in one file only: {k}")
    print(f"same: {len(a) - len(differ) - len(set(a) - set(b))} of {len(a)} kernels identical")
    return 1 if differ or only else 0


# ---- verify: compare two `cuobjdump -sass` listings -----------------------------------------

INS_RE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*/\*\s*0x([0-9a-f]{16})\s*\*/\s*$")
HI_RE = re.compile(r"^\s*/\*\s*0x([0-9a-f]{16})\s*\*/\s*$")


def parse_listing(path):
    """{(function, occurrence): {address: (text, lo, hi)}}"""
    funcs = {}
    seen = {}
    cur = None
    pending = None
    for line in open(path, errors="replace"):
        if "Function :" in line:
            name = line.split("Function :", 1)[1].strip()
            seen[name] = seen.get(name, 0) + 1
            cur = {}
            funcs[(name, seen[name] - 1)] = cur
            pending = None
            continue
        if cur is None:
            continue
        m = INS_RE.search(line)
        if m:
            pending = (int(m.group(1), 16), m.group(2).strip(), int(m.group(3), 16))
            continue
        m = HI_RE.match(line)
        if m and pending:
            addr, text, lo = pending
            cur[addr] = (text, lo, int(m.group(1), 16))
            pending = None
    return funcs


def cmd_verify(args):
    orig = parse_listing(args.orig)
    new = parse_listing(args.new)
    report = json.load(open(args.report))
    wanted = {}
    for e in report["edits"]:
        wanted.setdefault(e["function"], {})[e["address"]] = e
    problems = []
    if set(orig) != set(new):
        problems.append("the two listings hold different functions")
    changed = 0
    found = {}
    for key in orig:
        a, b = orig[key], new.get(key, {})
        if set(a) != set(b):
            problems.append(f"{key[0]}: instruction addresses differ")
            continue
        for addr in a:
            ta, loa, hia = a[addr]
            tb, lob, hib = b[addr]
            if loa == lob and hia == hib:
                continue
            changed += 1
            where = f"{key[0]}+{addr:#x}"
            if loa != lob:
                problems.append(f"{where}: low word changed")
            if (hia ^ hib) & ~PATCH_MASK:
                problems.append(f"{where}: bits other than yield/reuse changed")
            if hib & PATCH_MASK != 0:
                problems.append(f"{where}: yield hint not set or reuse left on")
            if ta.replace(".reuse", "") != tb:
                problems.append(f"{where}: text {ta!r} -> {tb!r}")
            if not re.match(r"FFMA\s", tb):
                problems.append(f"{where}: {tb!r} is not an FFMA")
            e = wanted.get(key[0], {}).get(addr)
            if e is None:
                problems.append(f"{where}: changed but not in the report")
                continue
            wait = a.get(e["wait"])
            if wait is None or not wait[0].startswith("WARPGROUP.DEPBAR"):
                problems.append(f"{where}: the instruction at the wait is {wait and wait[0]!r}")
            found[(key[0], addr)] = True
    missing = sum(1 for f, d in wanted.items() for addr in d if (f, addr) not in found)
    if missing:
        problems.append(f"{missing} reported edits do not show in the listing")
    # The disassembler's view of every instruction the opcode test calls a promotion FFMA, and
    # of every WARPGROUP.DEPBAR, in the reported functions.
    opcode_checked = 0
    for key, ins in orig.items():
        if key[0] not in wanted:
            continue
        for addr, (text, lo, hi) in ins.items():
            if lo & 0xFFF == OP_WARPGROUP and lo & DEPBAR_BIT:
                opcode_checked += 1
                if not text.startswith("WARPGROUP.DEPBAR"):
                    problems.append(f"{key[0]}+{addr:#x}: DEPBAR by opcode but {text!r}")
            elif is_promotion_ffma(lo, hi):
                opcode_checked += 1
                reg = r"-?\|?(R\d+|RZ)\|?(\.reuse)?"
                if not re.match(rf"FFMA(\.\w+)* {reg}, {reg}, {reg}, {reg}$", text):
                    problems.append(f"{key[0]}+{addr:#x}: FFMA by opcode but {text!r}")
            elif text.startswith("WARPGROUP.DEPBAR"):
                problems.append(f"{key[0]}+{addr:#x}: {text!r} missed by the opcode test")
    print(f"verify: {changed} instructions differ, {len(found)} of "
          f"{sum(len(d) for d in wanted.values())} reported edits seen, "
          f"{opcode_checked} opcode decodings cross-checked, {len(problems)} problems")
    for p in problems[:40]:
        print("  " + p)
    return 1 if problems else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scan")
    s.add_argument("file")
    s.add_argument("--kernel", default="GemmFp8Kernel")
    p = sub.add_parser("patch")
    p.add_argument("input")
    p.add_argument("output")
    p.add_argument("--pattern", required=True)
    p.add_argument("--kernel", default="GemmFp8Kernel")
    p.add_argument("--also-yielded", action="store_true")
    p.add_argument("--clear", action="store_true",
                   help="take the yield hint off the chosen FFMAs instead of setting it")
    p.add_argument("--allow-empty", action="store_true")
    p.add_argument("--report")
    c = sub.add_parser("same")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--kernel", default="GemmFp8Kernel")
    v = sub.add_parser("verify")
    v.add_argument("orig")
    v.add_argument("new")
    v.add_argument("--report", required=True)
    args = ap.parse_args(argv)
    try:
        return {"scan": cmd_scan, "patch": cmd_patch, "same": cmd_same,
                "verify": cmd_verify}[args.cmd](args)
    except PatchError as e:
        print(f"sass_patch: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
