-- Writes the benchmark GPT's initial weights and 10 batches as .npy files into DIR, trains
-- 10 AdamW steps from them and prints the losses, for comparison with the PyTorch peer
-- (scripts/bench/peers/gpt_train_torch.py parity DIR 10) started from the same files.
--   build/llmlab scripts/bench/gpt_parity.lua DIR [steps]
local dir, steps = assert(arg[1], "usage: gpt_parity.lua DIR [steps]"), tonumber(arg[2]) or 10
lab.manual_seed(123)
local model = lab.nn.GPT { vocab = 512, d_model = 256, n_layer = 4, n_head = 4, seq_len = 128 }
for name, t in pairs(model:state_dict()) do t:save_npy(dir .. "/" .. name .. ".npy") end
local opt = lab.optim.AdamW(model:parameters(), { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0.1 })
local losses = {}
for s = 0, steps - 1 do
  local ids, tg = lab.randint(0, 512, { 8, 128 }), lab.randint(0, 512, { 8, 128 })
  ids:save_npy(string.format("%s/ids%d.npy", dir, s))
  tg:save_npy(string.format("%s/tg%d.npy", dir, s))
  local _, loss = model(ids, tg)
  opt:zero_grad()
  loss:backward()
  opt:step()
  losses[#losses + 1] = string.format("%.8f", loss:item())
end
print(table.concat(losses, " "))
