-- The small model and the training step shared by test_ckpt_crash.lua and its child process.
local H = {}
function H.model()
  lab.manual_seed(7)
  local m = lab.nn.Sequential(lab.nn.Linear(4, 4), lab.nn.LayerNorm(4))
  return m, lab.optim.AdamW(m:parameters(), { lr = 0.1 })
end
function H.step(m, opt, seed)
  lab.manual_seed(seed)
  local x = lab.randn(3, 4)
  opt:zero_grad()
  m(x):pow(2):mean():backward()
  opt:step()
end
return H
