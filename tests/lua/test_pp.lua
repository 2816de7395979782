-- Pipeline parallelism at 1, 2 and 4 stages: GPipe and 1F1B schedules train an MLP exactly
-- as one rank does with the whole batch (loss and every stage's parameters after 3 steps).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local E = require("equivalence")
local s, p = lab.dist.rank(), lab.dist.world()
local W, B, M = 8, 8, 4

local function layers()
  lab.manual_seed(21)
  local ls = {}
  for i = 1, 4 do
    ls[#ls + 1] = T.place(lab.nn.Linear(W, W, { dtype = "f64" }))
    ls[#ls + 1] = lab.nn.GELU()
  end
  return ls
end
lab.manual_seed(5)
local X, Y = T.place(lab.randn(B, W, { dtype = "f64" })), T.place(lab.randn(B, W, { dtype = "f64" }))
local function mse(y, t) return ((y - t) ^ 2):mean() end

for _, schedule in ipairs({ "gpipe", "1f1b" }) do
  T.test(schedule .. ": the pipeline equals one rank with the whole batch", function()
    local all = layers()
    local ref = T.place(lab.nn.Sequential(all))
    local ropt = lab.optim.SGD(ref:parameters(), { lr = 0.1 })
    local stages = lab.pp.partition(layers(), p)
    local pipe = lab.pp.Pipeline(stages[s + 1], { micro_batches = M, schedule = schedule, loss = mse,
      activation_shape = function(mb) return { mb, W } end })
    local opt = lab.optim.SGD(pipe:parameters(), { lr = 0.1 })
    for step = 1, 3 do
      ropt:zero_grad()
      local l_ref = mse(ref(X), Y)
      l_ref:backward()
      ropt:step()
      opt:zero_grad()
      local l = pipe:train_step(X, Y)
      opt:step()
      T.near(l, l_ref:item(), 1e-10, "loss of step " .. step)
    end
    -- this stage's layer k is layer s * per + k of the reference; every reference parameter
    -- is compared on the rank of its stage
    local per = #all // p
    E.check(T, schedule, E.entries(stages[s + 1], { rename = function(name)
      local k, rest = name:match("^(%d+)%.(.*)$")
      return (tonumber(k) + s * per) .. "." .. rest
    end }), ref, { rtol = 1e-10, atol = 1e-12 })
  end)
end

T.test("partition splits as evenly as it can", function()
  local five = {}
  for i = 1, 5 do five[i] = T.place(lab.nn.Linear(1, 1)) end -- (a stage is a Sequential: its layers are modules)
  local parts = lab.pp.partition(five, 2)
  T.eq(parts[1].n, 3)
  T.eq(parts[2].n, 2)
end)

T.finish()
