-- A small GPT trained 20 steps on a device against the same run on the cpu (the GPU check's
-- "20-step GPT vs CPU" step): same seed, same batches, AdamW; prints every step's two losses,
-- the largest loss difference and the largest relative difference over every parameter, and
-- fails (exit 1) beyond 1e-4 on a loss or 1e-3 on a parameter (f32 both sides).
--   llmlab scripts/gpu/gpt20.lua [device=cuda]      (device=sim runs it without a GPU)
local device = (arg[1] or "device=cuda"):match("^device=(.+)$") or arg[1]
local cfg = { vocab = 64, d_model = 64, n_layer = 2, n_head = 4, seq_len = 32 }
local STEPS = 20

local function train(dev)
  lab.manual_seed(1)
  local m = lab.nn.GPT(cfg):to(dev)
  local opt = lab.optim.AdamW(m:parameters(), { lr = 3e-3 })
  local losses = {}
  local t0 = os.clock()
  for k = 1, STEPS do
    lab.manual_seed(100 + k)
    local ids = lab.randint(0, cfg.vocab, { 4, cfg.seq_len }, { device = dev })
    opt:zero_grad()
    local _, loss = m(ids, ids)
    loss:backward()
    opt:step()
    losses[k] = loss:item()
  end
  return losses, m:parameters(), os.clock() - t0
end

local lc, pc, tc = train("cpu")
local ld, pd, td = train(device)
print(string.format("%4s %12s %12s %10s", "step", "cpu loss", device .. " loss", "|diff|"))
local worst_loss = 0
for k = 1, STEPS do
  local d = math.abs(ld[k] - lc[k])
  worst_loss = math.max(worst_loss, d)
  print(string.format("%4d %12.6f %12.6f %10.2e", k, lc[k], ld[k], d))
end
local worst_param = 0
for i = 1, #pc do
  local a, b = pd[i]:cpu():to("f64"), pc[i]:to("f64")
  local e = ((a - b):abs():max():item()) / math.max(1, b:abs():max():item())
  worst_param = math.max(worst_param, e)
end
print(string.format("gpt20: %d steps, %d parameters compared; max loss diff %.2e, max parameter rel diff %.2e " ..
  "(cpu %.2f s, %s %.2f s CPU time)", STEPS, #pc, worst_loss, worst_param, tc, device, td))
if worst_loss > 1e-4 or worst_param > 1e-3 then
  print("gpt20: FAIL (tolerances 1e-4 on a loss, 1e-3 on a parameter)")
  os.exit(1)
end
print("gpt20: OK")
