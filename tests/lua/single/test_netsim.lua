-- lab.netsim (pure arithmetic, one rank) against reasoning done by hand, not against its own formulas: limiting cases
-- (two GPUs on one link; latency-only and bandwidth-only messages), a small cluster whose
-- bytes per link are counted step by step, one congested link wherever it sits, leaf/spine
-- oversubscription that only bites across leaves, ECMP collisions sampled against the closed
-- form, monotonicity in every knob, the cited nccl-tests figures, and argument errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "../?.lua;" .. package.path
local T = require("harness")
local ns = lab.netsim

local function close(a, b, rel, what) T.ok(math.abs(a - b) <= rel * math.abs(b), string.format("%s: %.9g vs %.9g", what, a, b)) end

T.test("two GPUs on one 100 GB/s link: each sends half then half again, 1 GB takes 10 ms", function()
  local c = { nodes = 1, gpus_per_node = 2, nvlink_GBps = 100, alpha_nvlink_us = 0 }
  close(ns.ring(c, 1e9).time, 0.01, 1e-12, "ring")
  close(ns.ring(c, 1e9).busbw, 100, 1e-12, "busbw is the link")
  -- tree: up the chain with all of S, back down with all of S
  close(ns.tree(c, 1e9).time, 0.02, 1e-12, "tree")
  T.eq(ns.ring({ nodes = 1, gpus_per_node = 1 }, 1e9).time, 0, "one GPU sends nothing")
end)

T.test("2 nodes x 2 GPUs, 2 rails of 10 GB/s: the NIC hop carries 0.75 GB, 75 ms", function()
  -- 4 ranks, 2 rings (one per rail) of S/2 each; a ring all-reduce makes every rank send
  -- 2 x 3/4 of its ring's data: 0.75 GB per NIC hop at 10 GB/s = 75 ms, while each GPU's
  -- NVLink carries both rings, 1.5 GB at 100 GB/s = 15 ms: the network sets the time
  local c = { nodes = 2, gpus_per_node = 2, nvlink_GBps = 100, nics_per_node = 2, nic_GBps = 10,
              alpha_nvlink_us = 0, alpha_net_us = 0 }
  local r = ns.ring(c, 1e9)
  close(r.time, 0.075, 1e-12, "ring time")
  T.ok(r.bottleneck:find("NIC"), r.bottleneck)
  -- NVLink slower than the rails: then NVLink sets it (1.5 GB at 10 GB/s)
  c.nvlink_GBps = 10
  close(ns.ring(c, 1e9).time, 0.15, 1e-12, "NVLink-bound")
end)

T.test("one congested link stalls the whole ring, wherever it is", function()
  local base = { nodes = 4, gpus_per_node = 2, nvlink_GBps = 100, nics_per_node = 2, nic_GBps = 10,
                 alpha_nvlink_us = 0, alpha_net_us = 0 }
  local clean = ns.ring(base, 1e9).time
  for node = 1, 4 do
    for rail = 1, 2 do
      local c = {}
      for k, v in pairs(base) do c[k] = v end
      c.pause = { node = node, rail = rail, fraction = 0.5 }
      -- that hop runs half the time: every step of its ring waits for it, and the collective
      -- waits for that ring: twice the time, the same for every position
      close(ns.ring(c, 1e9).time, 2 * clean, 1e-12, "paused hop at node " .. node .. " rail " .. rail)
    end
  end
end)

T.test("latency: a ring of 512 ranks pays 1022 steps, a tree of 64 nodes its depth", function()
  local c = { nodes = 64, gpus_per_node = 8, alpha_nvlink_us = 2, alpha_net_us = 5 }
  close(ns.ring(c, 0).time, 1022 * 5e-6, 1e-12, "ring latency")
  close(ns.tree(c, 0).time, 2 * (6 * 5 + 7 * 2) * 1e-6, 1e-12, "tree latency")
  T.ok(ns.tree(c, 64 * 1024).time < ns.ring(c, 64 * 1024).time, "tree wins small messages at scale")
  -- large messages: both bandwidth-bound, the ring's bandwidth term (n-1)/n of the tree's,
  -- its 1022 latency steps on top (5.1 ms against 43 ms at 8 GB): within 12% of each other
  local r, t = ns.ring(c, 8e9).time, ns.tree(c, 8e9).time
  T.ok(math.abs(r - t) / t < 0.12, string.format("ring %.4f s, tree %.4f s at 8 GB", r, t))
end)

T.test("oversubscription bites only across leaves", function()
  local c = { nodes = 4, gpus_per_node = 8, nvlink_GBps = 1000, nics_per_node = 8, nic_GBps = 50,
              nodes_per_leaf = 4, oversubscription = 2, alpha_nvlink_us = 0, alpha_net_us = 0 }
  close(ns.ring(c, 1e9).bottleneck_GBps, 400, 1e-12, "one leaf: the NICs")
  c.nodes_per_leaf = 2 -- nodes 2->3 and 4->1 cross the spine at half the NIC
  close(ns.ring(c, 1e9).bottleneck_GBps, 200, 1e-12, "two leaves at 2:1")
end)

T.test("ECMP collisions: sampled fabrics average to the closed form", function()
  local c = { nodes = 16, gpus_per_node = 8, nvlink_GBps = 1000, nics_per_node = 2, nic_GBps = 50,
              nodes_per_leaf = 4, ecmp_collision = 0.05, alpha_nvlink_us = 0, alpha_net_us = 0 }
  local expected, p_any = ns.expected_ring(c, 1e9)
  -- 4 cross-leaf hops per ring x 2 rails: P(at least one collides) = 1 - 0.95^8
  close(p_any, 1 - 0.95 ^ 8, 1e-12, "probability")
  local sum, trials = 0, 1500
  for seed = 1, trials do sum = sum + ns.ring(c, 1e9, seed).time end
  close(sum / trials, expected, 0.05, "mean of 1500 fabrics (3 sigma is 2.7%)")
  local none = {}
  for k, v in pairs(c) do none[k] = v end
  none.ecmp_collision = 0
  T.ok(expected > ns.ring(none, 1e9).time, "collisions cost time")
end)

T.test("monotone in every knob", function()
  local base = { nodes = 8, gpus_per_node = 8, nodes_per_leaf = 2 }
  local function with(k, v) local c = {} for a, b in pairs(base) do c[a] = b end c[k] = v return c end
  local prev = -1
  for _, s in ipairs({ 0, 1e3, 1e6, 1e9 }) do
    local t = ns.ring(base, s).time
    T.ok(t > prev, "time grows with size")
    prev = t
  end
  T.ok(ns.ring(with("nic_GBps", 25), 1e9).time > ns.ring(with("nic_GBps", 50), 1e9).time, "slower NICs, longer")
  T.ok(ns.ring(with("oversubscription", 4), 1e9).time > ns.ring(with("oversubscription", 2), 1e9).time, "more oversubscription")
  T.ok(ns.expected_ring(with("ecmp_collision", 0.2), 1e9) > ns.expected_ring(with("ecmp_collision", 0.1), 1e9), "more collisions")
end)

T.test("the DGX H100 preset against the cited nccl-tests figures", function()
  local one = ns.ring({ nodes = 1 }, 8 * 2 ^ 30)
  T.ok(one.busbw > 470 and one.busbw < 481, "one node: " .. one.busbw)
  local many = ns.ring({ nodes = 4 }, 8 * 2 ^ 30)
  -- 8 rails at 46-48 GB/s each
  T.ok(many.busbw >= 8 * 46 * 0.99 and many.busbw <= 8 * 48, "4 nodes: " .. many.busbw)
end)

T.test("errors name netsim, the field and the value", function()
  T.raises(function() ns.ring({ nodes = 0 }, 1) end, "netsim", "nodes must be a positive integer")
  T.raises(function() ns.ring({ nodes = 2, colour = 1 }, 1) end, "netsim", "unknown cluster field 'colour'")
  T.raises(function() ns.ring({ nodes = 2, ecmp_collision = 2 }, 1) end, "ecmp_collision")
  T.raises(function() ns.ring({ nodes = 2, oversubscription = 0.5 }, 1) end, "oversubscription")
  T.raises(function() ns.ring({ nodes = 2, pause = { node = 3, rail = 1, fraction = 0.5 } }, 1) end, "pause.node 3")
  T.raises(function() ns.ring({ nodes = 2 }, -1) end, "bytes must be")
  T.raises(function() ns.ring(5, 1) end, "cluster takes a table")
  T.raises(function() ns.from_alpha_beta(1e-5, 1e-10, 1) end, "at least 2 ranks")
end)

T.test("this machine's fit as a cluster reproduces the fitted line", function()
  local alpha, beta, n = 20e-6, 1 / 5e9, 4
  local c = ns.from_alpha_beta(alpha, beta, n)
  for _, s in ipairs({ 1e3, 1e6, 1e8 }) do close(ns.ring(c, s).time, alpha + beta * s, 1e-9, "size " .. s) end
end)

T.finish()
