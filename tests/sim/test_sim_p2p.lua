-- Sends and recvs on sim tensors through runtime/dist/nccl.c (the sim's NCCL on MPI), every
-- value against the cpu's MPI path. nccl.c issued each send and recv on its own on the group's
-- one stream, and an NCCL send waits for its peer's recv: two ranks that isend to each other
-- before they irecv (ring attention) waited for each other for ever (on the sim too, so its
-- sends and recvs staged through MPI). Now nccl.c holds a group's sends and recvs until the
-- next wait, collective or blocking call and issues them as one NCCL group, as PyTorch's
-- batch_isend_irecv does; lab.cuda.sim_nccl_calls() proves each took NCCL. At 2 ranks.
-- Run: build/llmlab -n 2 --device sim tests/sim/test_sim_p2p.lua (ctest: sim.test_sim_p2p.np2)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")
local dist = lab.dist
local n, r = dist.world(), dist.rank()
lab.manual_seed(200 + r)
local cpu = { device = "cpu" }
local peer, right, left = 1 - r, (r + 1) % n, (r - 1) % n

local same = dofile((arg[0]:match("(.*/)") or "./") .. "sim_same.lua")

-- fn on cpu tensors, then on their sim copies (counting NCCL calls), every tensor compared
local function both(what, calls, fn, ...)
  local ref, sim = { ... }, {}
  for i, t in ipairs(ref) do sim[i] = t:to("sim") end
  fn(table.unpack(ref))
  local c0 = lab.cuda.sim_nccl_calls()
  fn(table.unpack(sim))
  T.eq(lab.cuda.sim_nccl_calls() - c0, calls, what .. ": NCCL calls on the sim")
  for i = 1, #ref do same(sim[i], ref[i], what .. " tensor " .. i, 0) end
end

-- the communicator is made at a group's first collective (a send or recv alone stages)
dist.all_reduce(lab.ones(1, { device = "sim" }))

T.test("isend, isend, irecv, irecv between two ranks (400 KB each, past MPI's eager size) = cpu", function()
  both("isend-isend-irecv-irecv", 4, function(a, b, x, y)
    local w = { dist.isend(a, peer, { tag = 1 }), dist.isend(b, peer, { tag = 2 }) }
    w[3], w[4] = dist.irecv(x, peer, { tag = 1 }), dist.irecv(y, peer, { tag = 2 })
    for _, h in ipairs(w) do h:wait() end
  end, lab.randn(100000, cpu), lab.randn(100000, cpu), lab.zeros(100000, cpu), lab.zeros(100000, cpu))
  -- a collective after held sends and recvs: they go first, in posting order
  both("isend, irecv, all_reduce, then wait", 3, function(a, x, s)
    local w1, w2 = dist.isend(a, peer), dist.irecv(x, peer)
    dist.all_reduce(s)
    w1:wait(); w2:wait()
  end, lab.randn(1000, cpu), lab.zeros(1000, cpu), lab.randint(-8, 9, { 5 }, cpu):to("f32"))
  -- blocking send and recv: the lower rank sends first
  both("send then recv / recv then send", 2, function(a, x)
    if r == 0 then dist.send(a, peer); dist.recv(x, peer) else dist.recv(x, peer); dist.send(a, peer) end
  end, lab.randn(50000, cpu), lab.zeros(50000, cpu))
end)

T.test("ring attention (lab.cp ring) on sim through NCCL: output and q/k/v gradients = cpu", function()
  local function run(dev)
    lab.manual_seed(5)
    local q, k, v, w = lab.randn(1, 2, 8, 4, cpu), lab.randn(1, 2, 8, 4, cpu), lab.randn(1, 2, 8, 4, cpu),
      lab.randn(1, 2, 8, 4, cpu)
    local o = { group = dist.world_group(), zigzag = true, causal = true, impl = "math" }
    local function mine(t) return lab.cp.shard(t, 3, o):contiguous():to(dev) end
    local ql, kl, vl = mine(q):requires_grad_(), mine(k):requires_grad_(), mine(v):requires_grad_()
    local out = lab.cp.ring_attention(ql, kl, vl, o)
    ;(out * mine(w)):sum():backward()
    return { out, ql.grad, kl.grad, vl.grad }
  end
  local want = run("cpu")
  local c0 = lab.cuda.sim_nccl_calls()
  local got = run("sim")
  local calls = lab.cuda.sim_nccl_calls() - c0
  T.ok(calls >= 4, "ring attention's sends and recvs took NCCL: " .. calls .. " calls")
  for i, what in ipairs({ "output", "dq", "dk", "dv" }) do same(got[i], want[i], what, 1e-5) end
end)

T.finish()
