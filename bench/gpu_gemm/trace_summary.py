import sys, array, statistics
ITERS=512
def load(path):
    a=array.array('I'); a.frombytes(open(path,'rb').read())
    return lambda c,s,i,m: a[((c*4+s)*ITERS+i)*8+m]
def rel(x,y): return (y-x)%(1<<32)
def sg(x): return x-(1<<32) if x>=(1<<31) else x
def med(x): return int(statistics.median(x)) if x else -1
def pct(x,p):
    s=sorted(x); return s[min(len(s)-1,int(p/100*len(s)))]
for path in sys.argv[1:]:
    T=load(path)
    print("==", path.split('/')[-1])
    for cta in range(2):
        ns={}
        for wg in range(2):
            n=sum(1 for i in range(ITERS) if T(cta,wg,i,0)!=0); ns[wg]=n
            if n<20: print(" cta",cta,"wg",wg,"n",n); continue
            r=range(8,n-1)
            f=lambda m0,m1: [rel(T(cta,wg,i,m0),T(cta,wg,i,m1)) for i in r]
            per=[rel(T(cta,wg,i,0),T(cta,wg,i+1,0)) for i in r]
            own=[rel(T(cta,wg,i-1,4),T(cta,wg,i,1)) for i in r]
            epi=f(4,5)
            print(f" cta{cta} wg{wg} n={n} period med={med(per)} mean={int(sum(per)/len(per))} | wait={med(f(0,1))} promote={med(f(1,2))} rel+next+full={med(f(2,3))} turn/mid={med(f(3,6))} issue/tail={med(f(6,4))} epi med={med(epi)} max={max(epi)} sum={sum(epi)} | issue->own done={med(own)}")
        if ns.get(0,0)>20 and ns.get(1,0)>20:
            n=min(ns[0],ns[1])
            d=[sg(rel(T(cta,0,i,1),T(cta,1,i,1))) for i in range(8,n-1)]
            print(f" cta{cta} wg1.done-wg0.done med={med(d)} p10={pct(d,10)} p90={pct(d,90)}")
        n=sum(1 for i in range(ITERS) if T(cta,2,i,1)!=0)
        if n>20:
            ew=[rel(T(cta,2,i,0),T(cta,2,i,1)) for i in range(8,n-1)]
            pp=[rel(T(cta,2,i,1),T(cta,2,i+1,1)) for i in range(8,n-1)]
            print(f" cta{cta} tma: empty-wait med={med(ew)} mean={int(sum(ew)/len(ew))} frac>100={sum(1 for v in ew if v>100)/len(ew):.2f} issue period med={med(pp)}")
            nc=ns.get(0,0)
            lat=[rel(T(cta,2,j,1),T(cta,0,j-1,3)) for j in range(8,min(n,nc))]
            if lat: print(f" cta{cta} tma issue -> wg0 full-ok med={med(lat)} p10={pct(lat,10)} p90={pct(lat,90)}")
        n=sum(1 for i in range(ITERS) if T(cta,3,i,1)!=0)
        if n>20:
            ew=[rel(T(cta,3,i,0),T(cta,3,i,1)) for i in range(8,n-1)]
            print(f" cta{cta} bscale warp empty-wait med={med(ew)}")
