-- Collectives on sim tensors through runtime/dist/nccl.c on the sim: nccl.c compiled against
-- runtime/simrt's NCCL on MPI (runtime/simrt/nccl_mpi.c), ordered on the emulated streams.
-- Each op runs on sim tensors and on their cpu twins (MPI), every value compared; the shim's
-- call counter (lab.cuda.sim_nccl_calls) proves each sim op took the NCCL path (one NCCL call
-- per collective, one per non-empty send or recv of an all-to-all or of a group of held sends
-- and recvs: see runtime/dist/nccl.c). At 2 and 4 ranks.
-- Run: build/llmlab -n 2 --device sim tests/sim/test_sim_nccl.lua (ctest: sim.test_sim_nccl.np2/np4)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")
local dist = lab.dist
local n, r = dist.world(), dist.rank()
lab.manual_seed(100 + r) -- each rank its own values
local cpu = { device = "cpu" }

-- every element of the sim result against the cpu's (floats of random values: the sum's order
-- differs between MPI's tree and the shim's rank order, so within a few ulps; exact otherwise)
local same = dofile((arg[0]:match("(.*/)") or "./") .. "sim_same.lua")

-- runs fn(cpu tensors...) and fn(sim copies...), compares every argument fn writes
local function both(what, calls, tol, fn, ...)
  local ref = { ... }
  local sim = {}
  for i, t in ipairs(ref) do sim[i] = t:to("sim") end
  fn(table.unpack(ref))
  local c0 = lab.cuda.sim_nccl_calls()
  fn(table.unpack(sim))
  T.eq(lab.cuda.sim_nccl_calls() - c0, calls, what .. ": NCCL calls on the sim")
  for i = 1, #ref do same(sim[i], ref[i], what .. " tensor " .. i, tol) end
end

local function ints(dt, len) -- small integers: exact in every dtype and every summation order
  return lab.randint(-8, 9, { len }, cpu):to(dt)
end

T.test("the sim's collectives take the NCCL path", function()
  local t = lab.ones(3, { device = "sim" })
  dist.all_reduce(t)
  T.ok(dist.backend(t):find("^nccl %(sim:0%)"), dist.backend(t))
  T.values(t:to("cpu"), { n, n, n }, 0, "all_reduce of ones")
end)

T.test("all_reduce: every op, every dtype = cpu", function()
  for _, dt in ipairs({ "f32", "f64", "bf16", "f16", "i64", "i32" }) do
    for _, op in ipairs({ "sum", "max", "min", "prod" }) do
      both(dt .. " " .. op, 1, 0, function(x) dist.all_reduce(x, { op = op }) end, ints(dt, 37))
    end
  end
  both("f32 avg", 1, 1e-6, function(x) dist.all_reduce(x, { op = "avg" }) end, lab.randn(1000, cpu))
  both("f32 sum of random values", 1, 1e-5, function(x) dist.all_reduce(x) end, lab.randn(4097, cpu))
  both("f64 sum of random values", 1, 1e-12, function(x) dist.all_reduce(x) end, lab.randn(513, cpu):to("f64"))
end)

T.test("broadcast, reduce, all_gather, reduce_scatter = cpu", function()
  for root = 0, n - 1 do
    both("broadcast from " .. root, 1, 0, function(x) dist.broadcast(x, root) end, lab.randn(2, 33, cpu))
    both("reduce to " .. root, 1, 1e-5, function(x) dist.reduce(x, root) end, lab.randn(65, cpu))
  end
  both("all_gather_into_tensor", 1, 0, function(out, x) dist.all_gather_into_tensor(out, x) end,
    lab.zeros(7 * n, cpu), lab.randn(7, cpu))
  both("reduce_scatter", 1, 1e-5, function(out, x) dist.reduce_scatter(out, x) end, lab.zeros(5, cpu),
    lab.randn(5 * n, cpu))
  both("reduce_scatter max bf16", 1, 0, function(out, x) dist.reduce_scatter(out, x, "max") end,
    lab.zeros(6, cpu):to("bf16"), ints("bf16", 6 * n))
end)

T.test("all_to_all, all_to_all_single (uneven), send/recv, async = cpu", function()
  both("all_to_all", 2 * n, 0, function(out, x) dist.all_to_all(out, x) end, lab.zeros(n, 3, cpu), lab.randn(n, 3, cpu))
  -- rank r sends s + r + 1 rows to rank s
  local ins, outs, nin, nout = {}, {}, 0, 0
  for s = 0, n - 1 do
    ins[s + 1], outs[s + 1] = s + r + 1, r + s + 1
    nin, nout = nin + ins[s + 1], nout + outs[s + 1]
  end
  both("all_to_all_single", 2 * n, 0, function(out, x)
    dist.all_to_all_single(out, x, { output_split_sizes = outs, input_split_sizes = ins })
  end, lab.zeros(nout, 2, cpu), lab.randn(nin, 2, cpu))
  -- past MPI's eager size: a group that waited for its stream before each call waited for its
  -- own first send, which completes only when the peer posts the recv after it (a deadlock)
  both("all_to_all of 200 KB blocks", 2 * n, 0, function(out, x) dist.all_to_all(out, x) end,
    lab.zeros(n, 50000, cpu), lab.randn(n, 50000, cpu))
  -- a ring where every rank isends before it irecvs (ring attention): ungrouped NCCL sends on
  -- one stream waited for each other's recvs for ever (so the sim staged them); now held and
  -- issued as one NCCL group at the first wait (tests/sim/test_sim_p2p.lua)
  local right, left = (r + 1) % n, (r - 1) % n
  both("isend/irecv ring of 400 KB through NCCL", 2, 0, function(msg, got)
    local s = dist.isend(msg, right, { tag = 3 })
    local q = dist.irecv(got, left, { tag = 3 })
    s:wait(); q:wait()
  end, lab.randn(100000, cpu), lab.zeros(100000, cpu))
  both("async all_reduce + wait", 1, 1e-5, function(x)
    local w = dist.all_reduce(x, { async = true })
    w:wait()
  end, lab.randn(300, cpu))
end)

T.test("the NCCL op reads what the compute stream wrote before it (the stream wait)", function()
  -- an upload and a kernel queued just before the collective: the NCCL stream waits for them
  local x = lab.full({ 64 }, r + 1, cpu)
  for _ = 1, 5 do
    local s = (x:to("sim") * 2):contiguous()
    dist.all_reduce(s)
    same(s, lab.full({ 64 }, n * (n + 1), cpu), "2 * (1 + ... + n)")
  end
end)

T.test("a user group's NCCL communicator: async work on it, then the group released", function()
  -- work objects hold the group whose backend ran them (the device group): releasing the work
  -- once freed that device group (its count started at 0) and then the user group's release
  -- freed it again ("double free or corruption" in lab_devcomm_free, test_tp's place lane run)
  local all = {}
  for i = 0, n - 1 do all[#all + 1] = i end
  for round = 1, 2 do
    local g = dist.new_group(all)
    both("async all_reduce on a new group, round " .. round, 1, 1e-5, function(x)
      local w = dist.all_reduce(x, { group = g, async = true })
      w:wait()
    end, lab.randn(20, cpu))
    g = nil
    collectgarbage()
    collectgarbage()
  end
end)

T.finish()
