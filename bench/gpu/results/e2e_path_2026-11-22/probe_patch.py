import os
os.chdir('/work/main')
open('include/kerneld/kd_probe.h','w').write('''#pragma once
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
namespace kdprobe {
inline std::atomic<long long> g_sum[32];
inline std::atomic<long long> g_cnt[32];
inline thread_local long long t_last = 0;
inline long long NowNs() { return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
inline void Dump() { for (int i = 0; i < 32; ++i) if (g_cnt[i]) std::fprintf(stderr, "PROBE %d mean_us %.3f n %lld\\n", i, g_sum[i] / 1e3 / g_cnt[i], (long long)g_cnt[i]); }
struct Reg { Reg() { std::atexit(Dump); } };
inline Reg g_reg;
inline void Reset() { t_last = NowNs(); }
inline void P(int id) { long long n = NowNs(); g_sum[id] += n - t_last; g_cnt[id]++; t_last = n; }
}
''')
def sub(p, old, new):
    s=open(p).read(); assert s.count(old)==1,(p,old[:50]); s=s.replace(old,new); open(p,'w').write(s)
p='server/executor.cc'
sub(p,'#include "kerneld/kernels/status_macros.h"','#include "kerneld/kernels/status_macros.h"\n#include "kerneld/kd_probe.h"')
sub(p,'''  const absl::Time started = absl::Now();''','''  kdprobe::Reset();
  const absl::Time started = absl::Now();''')
sub(p,'''    if (prepare_) prepare_(q->backend, q->device, op);''','''    kdprobe::P(1);
    if (prepare_) prepare_(q->backend, q->device, op);''')
sub(p,'''    absl::Status s = q->backend->Run(op, *q->stream, std::move(on_timed));''','''    kdprobe::P(2);
    absl::Status s = q->backend->Run(op, *q->stream, std::move(on_timed));
    kdprobe::P(8);''')
sub(p,'''    absl::Status recorded = q->backend->RecordEvent(*q->stream, *batch.signal_event);
    CloseChecksFor(q, batch.session_id);''','''    absl::Status recorded = q->backend->RecordEvent(*q->stream, *batch.signal_event);
    kdprobe::P(9);
    CloseChecksFor(q, batch.session_id);
    kdprobe::P(10);''')
sub(p,'''  absl::Status synced = q->backend->Synchronize(*q->stream);''','''  kdprobe::P(11);
  absl::Status synced = q->backend->Synchronize(*q->stream);
  kdprobe::P(14);''')
p='kernels/cuda/cuda_backend.cc'
s=open(p).read()
s=s.replace('#include "kernels/cuda/kernel_timer.h"','#include "kernels/cuda/kernel_timer.h"\n#include "kerneld/kd_probe.h"',1)
open(p,'w').write(s)
sub(p,'''    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(s->device()));
    absl::MutexLock lock(&s->mu());
    KernelTimer::Span span;''','''    kdprobe::P(3);
    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(s->device()));
    absl::MutexLock lock(&s->mu());
    kdprobe::P(4);
    KernelTimer::Span span;''')
sub(p,'''    const absl::Status launched = Launch(op, *s);
    s->CountOp();''','''    kdprobe::P(5);
    const absl::Status launched = Launch(op, *s);
    kdprobe::P(6);
    s->CountOp();''')
sub(p,'''    if (on_timed) return timer_.End(span, s->stream(), std::move(on_timed));
    return absl::OkStatus();
  }''','''    if (on_timed) { auto st = timer_.End(span, s->stream(), std::move(on_timed)); kdprobe::P(7); return st; }
    return absl::OkStatus();
  }''')
sub(p,'''    timer_.DeliverCompleted(s->stream());
    return ReadChecks(group, &error_slabs_);''','''    kdprobe::P(13);
    timer_.DeliverCompleted(s->stream());
    kdprobe::P(15);
    return ReadChecks(group, &error_slabs_);''')
p='server/data_plane_service.cc'
sub(p,'#include "server/submit_ring_server.h"','#include "server/submit_ring_server.h"\n#include "kerneld/kd_probe.h"')
sub(p,'''    auto fail = [&finish](const absl::Status& s) { finish(s, 0.0); };
    if (daemon_->draining())''','''    kdprobe::P(26);
    auto fail = [&finish](const absl::Status& s) { finish(s, 0.0); };
    if (daemon_->draining())''')
sub(p,'''    OpBinder binder(**session);''','''    kdprobe::P(20);
    OpBinder binder(**session);''')
sub(p,'''    absl::Status s = build(binder, batch.ops);
    if (!s.ok()) return fail(s);''','''    absl::Status s = build(binder, batch.ops);
    if (!s.ok()) return fail(s);
    kdprobe::P(21);''')
sub(p,'''    if (completion.mode() < 0 || completion.mode() > v1::Completion::Mode_MAX) {''','''    kdprobe::P(22);
    if (completion.mode() < 0 || completion.mode() > v1::Completion::Mode_MAX) {''')
sub(p,'''    batch.keep_alive = binder.TakeRegions();''','''    kdprobe::P(23);
    batch.keep_alive = binder.TakeRegions();''')
sub(p,'''    daemon_->executor().Submit(std::move(batch));
  }''','''    kdprobe::P(24);
    daemon_->executor().Submit(std::move(batch));
  }''')
p='server/submit_ring_server.cc'
sub(p,'#include "proto/kerneld/v1/submit_ring.h"','#include "proto/kerneld/v1/submit_ring.h"\n#include "kerneld/kd_probe.h"')
sub(p,'''  std::string bytes(reinterpret_cast<const char*>(sr::Payload(slot)), length);''','''  kdprobe::Reset();
  std::string bytes(reinterpret_cast<const char*>(sr::Payload(slot)), length);''')
sub(p,'''  handler_(request, std::move(reply));
  return true;''','''  kdprobe::P(25);
  handler_(request, std::move(reply));
  kdprobe::P(28);
  return true;''')
sub(p,'''  slot->state.store(sr::kReply);
  if (slot->client_sleeping.load() != 0) sr::FutexWakeAll(&slot->state);''','''  kdprobe::P(27);
  slot->state.store(sr::kReply);
  if (slot->client_sleeping.load() != 0) sr::FutexWakeAll(&slot->state);''')
