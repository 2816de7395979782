-- A GPT: token and position embeddings, pre-LN transformer blocks (causal self-attention
-- and an MLP, each wrapped in a residual), a final LayerNorm, and a language-model head
-- tied to the token embedding. Initialised as GPT-2: N(0, 0.02), with the residual
-- projections scaled by 1/sqrt(2 n_layer) so the residual stream does not grow with depth.
local nn = lab.nn
local errors = require("lab.errors")

-- x [B, T, C] -> [B, T, C]: heads split C, attend causally, and are merged back
local CausalSelfAttention = nn.class("CausalSelfAttention")
nn.CausalSelfAttention = CausalSelfAttention
function CausalSelfAttention:init(cfg)
  errors.type("CausalSelfAttention", 1, cfg, "table", "a config table")
  errors.posint("CausalSelfAttention", 1, cfg.d_model, "cfg.d_model")
  errors.posint("CausalSelfAttention", 1, cfg.n_head, "cfg.n_head")
  if cfg.d_model % cfg.n_head ~= 0 then
    errors.raise("CausalSelfAttention", "d_model %d is not a multiple of n_head %d", cfg.d_model, cfg.n_head)
  end
  self.d_model, self.n_head = cfg.d_model, cfg.n_head
  self.attn_impl = cfg.attention -- nil: lab.sdpa's default (the FlashAttention kernel where it applies)
  self:add("qkv", nn.Linear(cfg.d_model, 3 * cfg.d_model))
  self:add("proj", nn.Linear(cfg.d_model, cfg.d_model))
  self:add("drop", nn.Dropout(cfg.dropout or 0))
end
function CausalSelfAttention:describe() return string.format("%d heads", self.n_head) end
function CausalSelfAttention:forward(x)
  errors.tensor("CausalSelfAttention:forward", 1, x)
  if x:dim() ~= 3 or x.shape[3] ~= self.d_model then
    errors.raise("CausalSelfAttention:forward", "x must be [B, T, %d] (d_model %d), got shape [%s]", self.d_model,
      self.d_model, table.concat(x.shape, ", "))
  end
  local B, T, C = x.shape[1], x.shape[2], x.shape[3]
  local H = self.n_head
  local q, k, v = table.unpack(self.qkv(x):split(C, 3))
  local function heads(t) return t:view(B, T, H, C // H):transpose(2, 3) end -- [B, H, T, D]
  local y = lab.sdpa(heads(q), heads(k), heads(v), { causal = true, impl = self.attn_impl })
  y = y:transpose(2, 3):contiguous():view(B, T, C)
  return self.drop(self.proj(y))
end

local MLP = nn.class("MLP")
nn.MLP = MLP
function MLP:init(cfg)
  errors.type("MLP", 1, cfg, "table", "a config table")
  errors.posint("MLP", 1, cfg.d_model, "cfg.d_model")
  local hidden = cfg.d_ff or 4 * cfg.d_model
  self:add("fc", nn.Linear(cfg.d_model, hidden))
  self:add("act", nn.GELU({ approximate = "tanh" }))
  self:add("proj", nn.Linear(hidden, cfg.d_model))
  self:add("drop", nn.Dropout(cfg.dropout or 0))
end
-- fc and its GELU run as one op (lab.linear with an activation: the bias gradient is taken in
-- the GELU's backward pass) when both are the plain modules; an fc whose forward was replaced
-- on the instance (ZeRO-3's gathering, FP8) or of another class (LoRA), or another activation,
-- goes through the modules
local fused_gelu = { none = "gelu", tanh = "gelu_tanh" }
local function fused_activation(fc, act)
  if getmetatable(fc) ~= nn.Linear or rawget(fc, "forward") ~= nil then return nil end
  if getmetatable(act) ~= nn.GELU or rawget(act, "forward") ~= nil then return nil end
  return fused_gelu[act.approximate]
end
function MLP:forward(x)
  local kind = fused_activation(self.fc, self.act)
  local h
  if kind then h = lab.linear(x, self.fc.weight, self.fc.bias, { activation = kind })
  else h = self.act(self.fc(x)) end
  return self.drop(self.proj(h))
end

local Block = nn.class("Block")
nn.Block = Block
-- layer: the block's 1-based index; with cfg.moe every `every`-th block has a lab.moe.MoE
function Block:init(cfg, layer)
  errors.type("Block", 1, cfg, "table", "a config table")
  errors.posint("Block", 1, cfg.d_model, "cfg.d_model")
  self:add("ln1", nn.LayerNorm(cfg.d_model))
  self:add("attn", CausalSelfAttention(cfg))
  self:add("ln2", nn.LayerNorm(cfg.d_model))
  local m = cfg.moe
  if m and (layer or 1) % (m.every or 1) == 0 then
    local opts = setmetatable({ d_ff = m.d_ff or cfg.d_ff }, { __index = m })
    self:add("mlp", lab.moe.MoE(cfg.d_model, opts))
  else
    self:add("mlp", MLP(cfg))
  end
end
function Block:forward(x)
  x = x + self.attn(self.ln1(x))
  return x + self.mlp(self.ln2(x))
end

-- cfg: vocab, d_model, n_layer, n_head, seq_len, [d_ff], [dropout], [tied=true],
-- [attention = 'flash'|'math': lab.sdpa's impl; default flash where the device has the kernel],
-- [moe = {experts=, top_k=, every=, capacity_factor=, activation=, group=, ...}: see lab.moe]
local GPT = nn.class("GPT")
nn.GPT = GPT
-- more layers than this is a mistake (the deepest published models have ~128); 1 << 50 of
-- them would be built one by one until memory ran out
local MAX_LAYERS = 1 << 16
function GPT:init(cfg)
  errors.arg(type(cfg) == "table", "GPT", 1, "a config table {vocab=, d_model=, n_layer=, n_head=, seq_len=}", cfg)
  for _, k in ipairs({ "vocab", "d_model", "n_layer", "n_head", "seq_len" }) do
    if math.type(cfg[k]) ~= "integer" or cfg[k] < 1 then
      errors.raise("GPT", "cfg.%s must be a positive integer, got %s (needs vocab, d_model, n_layer, n_head, seq_len)",
        k, tostring(cfg[k]))
    end
  end
  if cfg.n_layer > MAX_LAYERS then errors.raise("GPT", "cfg.n_layer = %d is more than %d layers", cfg.n_layer, MAX_LAYERS) end
  self.cfg = cfg
  self:add("wte", nn.Embedding(cfg.vocab, cfg.d_model))
  self:add("wpe", nn.Embedding(cfg.seq_len, cfg.d_model))
  self:add("drop", nn.Dropout(cfg.dropout or 0))
  local blocks = nn.ModuleList()
  for i = 1, cfg.n_layer do blocks:append(Block(cfg, i)) end
  self:add("blocks", blocks)
  self:add("ln_f", nn.LayerNorm(cfg.d_model))
  if cfg.tied == false then self:add("head", nn.Linear(cfg.d_model, cfg.vocab, { bias = false }))
  else
    -- the output projection is wte's weight, used here outside wte's forward: marked (as
    -- Megatron-LM marks its shared embedding) so ZeRO-3 keeps it gathered across both uses
    self.wte.weight.shared = true
  end
  self:init_weights()
end

function GPT:describe()
  local c = self.cfg
  return string.format("vocab %d, d_model %d, %d layers, %d heads, seq %d", c.vocab, c.d_model, c.n_layer, c.n_head, c.seq_len)
end

function GPT:init_weights()
  local std, resid_std = 0.02, 0.02 / math.sqrt(2 * self.cfg.n_layer)
  lab.no_grad(function()
    for _, np in ipairs(self:named_parameters()) do
      local name, p = np[1], np[2]
      if name:match("bias$") then
        if not name:match("^ln") and not name:match("%.ln") then p:zero_() end
      elseif name:match("ln.*weight$") or name:match("ln_f") then
        -- LayerNorm weights stay 1
      elseif name:match("proj%.weight$") then
        p:normal_(0, resid_std)
      else
        p:normal_(0, std)
      end
    end
  end)
end

-- ids [B, T] (0-based token ids) -> logits [B, T, vocab]; with targets also the mean loss
function GPT:forward(ids, targets)
  errors.tensor("GPT:forward", 1, ids)
  if #ids.shape ~= 2 then
    errors.raise("GPT:forward", "ids must be [B, T] token ids, got shape [%s]", table.concat(ids.shape, ", "))
  end
  errors.arg(targets == nil or lab.is_tensor(targets), "GPT:forward", 2, "a tensor of targets or nil", targets)
  local T = ids.shape[2]
  if T > self.cfg.seq_len then errors.raise("GPT:forward", "a sequence of %d tokens exceeds seq_len %d", T, self.cfg.seq_len) end
  local pos = lab.arange(T, { device = ids.device })
  local x = self.drop(self.wte(ids) + self.wpe(pos))
  for _, block in self.blocks:iter() do x = block(x) end
  x = self.ln_f(x)
  local logits
  if self.head then -- through the module, so ZeRO-3 can gather its weight around the call
    logits = self.head(x)
  else -- tied: the token embedding's weight serves as the output projection (lab.linear: its
    -- gradient comes out in the weight's layout, ready to add to the embedding's)
    logits = lab.linear(x, self.wte.weight)
  end
  if targets then
    -- the loss in fp32 even when the model computes in 16 bits (as torch's autocast does):
    -- a log-sum-exp over the vocabulary loses digits in bf16, and a scaled f16 loss overflows
    local l = (logits.dtype == "bf16" or logits.dtype == "f16") and logits:float() or logits
    local loss = lab.cross_entropy(l, targets)
    if self.cfg.moe then loss = loss + lab.moe.aux_total(self) end -- router balance and z-losses
    return logits, loss
  end
  return logits
end

-- forward and backward FLOPs per token: 6 N for the weights plus 12 L T C for attention
-- scores (Kaplan et al., as in nanoGPT's estimate_mfu)
function GPT:flops_per_token()
  local c = self.cfg
  local n = self:num_parameters() - self.wpe.weight:numel()
  -- a MoE layer runs top_k of its experts per token, not all it holds
  for _, l in ipairs(lab.moe.layers(self)) do n = n - l:expert_parameters() + l.top_k * l:expert_parameters() // l.local_experts end
  return 6 * n + 12 * c.n_layer * c.seq_len * c.d_model
end

-- GPT:generate(ids, {max_new_tokens=, temperature=, top_k=, greedy=}) is in lab/generate.lua

return GPT
