-- lab.netsim: how long a ring or a tree all-reduce takes on a described GPU cluster, and why one
-- bad link anywhere slows the whole collective. A model to run, not a packet simulator.
--
-- The cluster: `nodes` servers of `gpus_per_node` GPUs joined by NVLink (nvlink_GBps: what one
-- GPU's links sustain for a collective, per direction), each server with `nics_per_node` NICs
-- (nic_GBps each, per direction) on a leaf/spine fabric: `nodes_per_leaf` servers per leaf
-- switch, the leaf's uplinks `oversubscription`:1 (2 means a cross-leaf flow gets half its NIC
-- when every node sends at once, as in an all-reduce). ECMP hashes each cross-leaf flow onto
-- one uplink: with probability `ecmp_collision` it shares that uplink with another flow and gets
-- half. A PFC pause is a link stalled part of the time: pause = {node=i, rail=r, fraction=f}
-- leaves the NIC hop out of node i on rail r running (1 - f) of the time.
--
-- The ring, as NCCL builds it on such a machine: one ring per NIC ("rail"), each visiting the
-- GPUs of a node over NVLink and leaving the node through its rail's NIC; the data is split
-- over the rings. An all-reduce on n ranks is 2(n-1) steps; in each step every rank sends
-- S/n bytes of its ring's share to the next, and a step ends when the slowest link of the ring
-- has delivered. So every step runs at the pace of the ring's slowest hop, and the collective
-- at the pace of the slowest ring:
--     T_ring = 2(n-1) alpha + 2(n-1)/n * S / B,   B = min(nvlink, rails x slowest NIC hop)
-- One congested hop anywhere sets B for the whole collective: that is the lesson.
-- The tree (NCCL's double binary tree over nodes, a chain inside each node): data goes up and
-- back down, pipelined, so each link carries S once per direction, and the latency is the
-- depth, not the ring's length:
--     T_tree = 2 (ceil(log2 nodes) alpha_net + (gpus_per_node - 1) alpha_nvlink) + 2 S / B_tree
-- with B_tree the same kind of bottleneck over the tree's edges. The tree wins small messages on
-- many nodes; for large ones both are bandwidth-bound and within (n-1)/n of each other here
-- (NCCL prefers rings there for effects this model leaves out, such as the tree's intra-node
-- chain sharing NVLink with its network traffic).
--
-- Calibration (netsim.published, cited): DGX/HGX H100 nccl-tests all_reduce busbw, one node,
-- 476-480 GB/s (NVIDIA/nccl-tests#290, a maintainer: "476GB/s looks to be in the expected range
-- for H100"; NVIDIA/nccl#1374 citing GTC S62129: 480 GB/s intra-node with NVLink SHARP; 475 GB/s
-- on 8 x H200, NVIDIA/nccl-tests#272); across nodes over NDR 400 Gb/s InfiniBand "46-48GB/s per
-- NIC" (same maintainer, nccl-tests#290), i.e. 368-384 GB/s with 8 rails; 248 nodes of 8 x H200
-- "typically around 350G", sometimes below 300 (NVIDIA/nccl-tests#283). On 2 nodes NCCL picks
-- the tree, which can exceed the NIC bound (nccl-tests#196, #160): compare rings with NCCL_ALGO=Ring.
-- And this machine's own alpha-beta (lab 11 fits one): netsim.from_alpha_beta.
local M = {}

local function fail(fmt, ...)
  local rank = (lab and lab.dist and lab.dist.rank) and lab.dist.rank() or 0
  error(string.format("rank %d: netsim: " .. fmt, rank, ...), 0)
end

local function positive(name, v, integer)
  if type(v) ~= "number" or v ~= v or v <= 0 or v == math.huge or (integer and math.type(v) ~= "integer") then
    fail("%s must be a positive %s, got %s", name, integer and "integer" or "number", tostring(v))
  end
end

-- The DGX H100 preset: 8 GPUs, NVLink 4 sustaining 476 GB/s busbw (the cited single-node figure;
-- with NVLink SHARP it exceeds the 450 GB/s per direction of the links), 8 x ConnectX-7 NDR at
-- 47 GB/s achieved each (the cited 46-48). Latencies: a few microseconds per step, the order
-- nccl-tests shows for small messages; they shape small sizes only.
M.dgx_h100 = { gpus_per_node = 8, nvlink_GBps = 476, nics_per_node = 8, nic_GBps = 47, nodes_per_leaf = 32,
               oversubscription = 1, ecmp_collision = 0, alpha_nvlink_us = 2, alpha_net_us = 5 }

M.published = {
  { what = "DGX/HGX H100, 1 node (8 GPUs), all_reduce busbw", GBps = { 476, 480 },
    source = "NVIDIA/nccl-tests#290 (476, 'expected range for H100'); NVIDIA/nccl#1374 (GTC S62129: 480)" },
  { what = "8 x H200, 1 node, all_reduce busbw", GBps = { 475, 475 }, source = "NVIDIA/nccl-tests#272" },
  { what = "H100 nodes over NDR 400G, per NIC (ring)", GBps = { 46, 48 }, source = "NVIDIA/nccl-tests#290" },
  { what = "248 nodes x 8 H200, all_reduce busbw", GBps = { 300, 350 }, source = "NVIDIA/nccl-tests#283" },
}

-- A cluster table with every field checked and defaults from the preset.
function M.cluster(spec)
  if type(spec) ~= "table" then fail("cluster takes a table {nodes=, gpus_per_node=, ...}, got %s", type(spec)) end
  local c = {}
  for k, v in pairs(M.dgx_h100) do c[k] = v end
  c.nodes = 1
  for k, v in pairs(spec) do
    if c[k] == nil and k ~= "pause" and k ~= "seed" and k ~= "__checked" then fail("unknown cluster field '%s'", tostring(k)) end
    c[k] = v
  end
  for _, k in ipairs({ "nodes", "gpus_per_node", "nics_per_node", "nodes_per_leaf" }) do positive(k, c[k], true) end
  for _, k in ipairs({ "nvlink_GBps", "nic_GBps" }) do positive(k, c[k]) end
  if c.nodes * c.gpus_per_node > 1 << 24 then fail("%d x %d GPUs is beyond what netsim models", c.nodes, c.gpus_per_node) end
  if type(c.oversubscription) ~= "number" or c.oversubscription < 1 then
    fail("oversubscription is uplink:downlink as x:1 with x >= 1, got %s", tostring(c.oversubscription))
  end
  if type(c.ecmp_collision) ~= "number" or c.ecmp_collision < 0 or c.ecmp_collision > 1 then
    fail("ecmp_collision is a probability in [0, 1], got %s", tostring(c.ecmp_collision))
  end
  for _, k in ipairs({ "alpha_nvlink_us", "alpha_net_us" }) do
    if type(c[k]) ~= "number" or c[k] < 0 then fail("%s must be >= 0 microseconds, got %s", k, tostring(c[k])) end
  end
  if c.pause ~= nil then
    local p = c.pause
    if type(p) ~= "table" or math.type(p.node) ~= "integer" or math.type(p.rail) ~= "integer" or type(p.fraction) ~= "number" then
      fail("pause is {node=i, rail=r, fraction=f} (integers i, r; f in [0, 1)), got %s", tostring(p))
    end
    if p.node < 1 or p.node > c.nodes then fail("pause.node %d is not a node (1..%d)", p.node, c.nodes) end
    if p.rail < 1 or p.rail > c.nics_per_node then fail("pause.rail %d is not a rail (1..%d)", p.rail, c.nics_per_node) end
    if p.fraction < 0 or p.fraction >= 1 then fail("pause.fraction %s must be in [0, 1)", tostring(p.fraction)) end
  end
  return c
end

local function leaf(c, node) return (node - 1) // c.nodes_per_leaf end

-- a deterministic generator for ECMP draws (splitmix64), so a seed reproduces a fabric; nearby
-- seeds give unrelated draws (a plain multiplicative generator's first draws from seeds 1, 2, 3
-- are all tiny, and every fabric collided)
local function rng(seed)
  local s = math.tointeger(seed) or 1
  return function()
    s = s + 0x9E3779B97F4A7C15
    local z = s
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    z = z ~ (z >> 31)
    return (z >> 11) * (1.0 / 9007199254740992.0)
  end
end

-- The network hop from node a to node b on rail r: its bandwidth in GB/s and why.
local function hop(c, a, b, r, draw)
  local bw, why = c.nic_GBps, "NIC"
  if leaf(c, a) ~= leaf(c, b) then
    bw = bw / c.oversubscription
    why = c.oversubscription > 1 and string.format("cross-leaf %g:1", c.oversubscription) or "cross-leaf"
    if c.ecmp_collision > 0 and draw() < c.ecmp_collision then
      bw, why = bw / 2, why .. ", ECMP collision"
    end
  end
  local p = c.pause
  if p and p.node == a and p.rail == r and p.fraction > 0 then
    bw, why = bw * (1 - p.fraction), why .. string.format(", PFC paused %.0f%%", 100 * p.fraction)
  end
  return bw, string.format("node %d -> node %d rail %d (%s, %.1f GB/s)", a, b, r, why, bw)
end

-- the slowest of the given network edges over every rail: bandwidth per rail and its description
local function slowest(c, edges, seed)
  local draw = rng(seed or c.seed)
  local worst, where = math.huge, nil
  for r = 1, c.nics_per_node do
    for _, e in ipairs(edges) do
      local bw, d = hop(c, e[1], e[2], r, draw)
      if bw < worst then worst, where = bw, d end
    end
  end
  return worst, where
end

-- a cluster from M.cluster, or a spec to make one from
local function as_cluster(c)
  if type(c) == "table" and c.__checked then return c end
  return M.cluster(c)
end

local function bytes_check(bytes)
  if type(bytes) ~= "number" or bytes < 0 or bytes ~= bytes or bytes == math.huge then
    fail("bytes must be a number >= 0, got %s", tostring(bytes))
  end
end

local function result(c, bytes, t, B, where, algo, n)
  local algbw = t > 0 and bytes / t / 1e9 or 0
  return { time = t, algbw = algbw, busbw = algbw * (n > 1 and 2 * (n - 1) / n or 0), bottleneck_GBps = B,
           bottleneck = where, algo = algo, ranks = n }
end

-- what both algorithms start from: the cluster (c or a spec for one), its GPU count, and
-- NVLink as the bottleneck until a slower hop is found
local function start(c, bytes)
  c = as_cluster(c)
  bytes_check(bytes)
  return c, c.nodes * c.gpus_per_node, c.nvlink_GBps, string.format("NVLink (%.0f GB/s per GPU)", c.nvlink_GBps)
end

-- Ring all-reduce of `bytes` on cluster c (a table from M.cluster or a spec for it); seed picks the
-- ECMP draws. Returns {time (s), algbw, busbw (GB/s), bottleneck_GBps, bottleneck (a sentence)}.
function M.ring(c, bytes, seed)
  local n, B, where
  c, n, B, where = start(c, bytes)
  if n == 1 then return result(c, bytes, 0, math.huge, "one GPU: nothing to send", "ring", 1) end
  if c.nodes > 1 then
    local edges = {}
    for i = 1, c.nodes do edges[#edges + 1] = { i, i % c.nodes + 1 } end
    local per_rail, hop_where = slowest(c, edges, seed)
    if per_rail * c.nics_per_node < B then
      B, where = per_rail * c.nics_per_node, string.format("%s x %d rails", hop_where, c.nics_per_node)
    end
  end
  local alpha = 1e-6 * (c.nodes > 1 and math.max(c.alpha_net_us, c.alpha_nvlink_us) or c.alpha_nvlink_us)
  local t = 2 * (n - 1) * alpha + 2 * (n - 1) / n * bytes / (B * 1e9)
  return result(c, bytes, t, B, where, "ring", n)
end

-- Tree all-reduce (binary tree over nodes, chain inside each node), as above.
function M.tree(c, bytes, seed)
  local n, B, where
  c, n, B, where = start(c, bytes)
  if n == 1 then return result(c, bytes, 0, math.huge, "one GPU: nothing to send", "tree", 1) end
  local depth = 0
  if c.nodes > 1 then
    local edges = {}
    for i = 2, c.nodes do edges[#edges + 1] = { i, i // 2 } end -- node i's parent is i // 2 (heap order)
    local per_rail, hop_where = slowest(c, edges, seed)
    if per_rail * c.nics_per_node < B then
      B, where = per_rail * c.nics_per_node, string.format("%s x %d rails", hop_where, c.nics_per_node)
    end
    depth = math.ceil(math.log(c.nodes, 2) - 1e-12)
  end
  local latency = 2 * (depth * c.alpha_net_us + (c.gpus_per_node - 1) * c.alpha_nvlink_us) * 1e-6
  local t = latency + 2 * bytes / (B * 1e9)
  return result(c, bytes, t, B, where, "tree", n)
end

-- The expected ring time over ECMP draws, in closed form: the ring is slowed (to half its
-- cross-leaf bandwidth) when at least one of its k cross-leaf hops collides, which happens with
-- probability 1 - (1 - p)^k. Returns the expected time and that probability.
function M.expected_ring(c, bytes)
  c = as_cluster(c)
  bytes_check(bytes)
  local k = 0
  for i = 1, c.nodes do if leaf(c, i) ~= leaf(c, i % c.nodes + 1) then k = k + 1 end end
  k = k * c.nics_per_node
  local p_any = 1 - (1 - c.ecmp_collision) ^ k
  local clean, hit = {}, {}
  for key, v in pairs(c) do clean[key], hit[key] = v, v end
  clean.ecmp_collision, hit.ecmp_collision = 0, 1 -- every cross-leaf hop collides: the slowest of them is halved
  local t_clean, t_hit = M.ring(clean, bytes).time, M.ring(hit, bytes).time
  return (1 - p_any) * t_clean + p_any * t_hit, p_any
end

-- This machine as a one-node "cluster" of n ranks, from lab 11's fit t = alpha + bytes * beta of
-- a measured all_reduce: the ring's 2(n-1) steps share alpha, and its bandwidth term
-- 2(n-1)/n bytes / B equals bytes * beta.
function M.from_alpha_beta(alpha, beta, n)
  positive("alpha", alpha)
  positive("beta", beta)
  positive("ranks", n, true)
  if n < 2 then fail("a fit needs at least 2 ranks, got %d", n) end
  return M.cluster({ nodes = 1, gpus_per_node = n, nvlink_GBps = 2 * (n - 1) / n / beta / 1e9,
                     alpha_nvlink_us = alpha / (2 * (n - 1)) * 1e6, alpha_net_us = 0 })
end

-- cluster() results are marked so ring/tree do not check them again
local check = M.cluster
function M.cluster(spec)
  local c = check(spec)
  c.__checked = true
  return c
end

return M
