import csv, collections, sys
path=sys.argv[1]; per_tile=int(sys.argv[2]); per_block=int(sys.argv[3])
lines=open(path).read().splitlines()
rows=list(csv.reader(lines[1:])); h={k:i for i,k in enumerate(rows[0])}; data=rows[1:]
def num(x):
    try: return float(x)
    except: return 0.0
S=h["Warp Stall Sampling (All Samples)"]
reasons=[k for k in h if k.startswith("stall_") and "Not Issued" not in k]
tot=sum(num(r[S]) for r in data)
groups=collections.defaultdict(lambda: [0.0, collections.Counter(), 0])
for r in data:
    e=num(r[h["Instructions Executed"]]); s=num(r[S]); src=r[h["Source"]]
    if "UCGABAR_WAIT" in src or "ERRBAR" in src: g="end-of-kernel waits (idle warps)"
    elif e==0: g="never executed"
    elif e>=per_block*0.9: g="per K block"
    elif per_tile*0.5<=e<=per_tile*3.1: g="per tile (epilogue, scheduler)"
    else: g="other (setup, producer, rare)"
    groups[g][0]+=s; groups[g][2]+=1
    for k in reasons: groups[g][1][k[6:]]+=num(r[h[k]])
for g,(s,c,n) in sorted(groups.items(), key=lambda x:-x[1][0]):
    print(f"{g:36s} {s/tot*100:5.1f}% of samples, {n:5d} instrs; " + ", ".join(f"{k} {v/s*100:.0f}%" for k,v in c.most_common(5) if s))
