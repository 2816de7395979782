-- Docstrings of lab.posttrain (help(lab.posttrain.DPO)): lua/lab/posttrain.lua, posttrain_cost.lua.
return {
  DPO = "lab.posttrain.DPO({policy=, reference=, optimizer=, beta=, group=}) -> trainer: Direct Preference Optimization; trainer:step(batch)",
  GRPO = "lab.posttrain.GRPO({policy=, reference=, reward=, group_size=, clip=, beta=, ...}) -> trainer: Group Relative Policy Optimization",
  reference = "lab.posttrain.reference(model) -> model: a frozen copy (no gradients, eval mode)",
  token_logprobs = "lab.posttrain.token_logprobs(logits, targets) -> tensor: log-probability of each target token (differentiable)",
  completion_logprobs = "lab.posttrain.completion_logprobs(model, seqs, prompt_len[, op]) -> tensor: summed log-probs of the completions",
  dpo_loss = "lab.posttrain.dpo_loss(pi_c, pi_r, ref_c, ref_r, beta) -> loss, stats: the DPO loss and its accuracies",
  group_advantages = "lab.posttrain.group_advantages(rewards, G) -> tensor: (r - group mean) / (group std + 1e-4)",
  grpo_loss = "lab.posttrain.grpo_loss(logp, old, ref, adv, clip, beta) -> loss, stats: the clipped GRPO objective with k3 KL",
  mean_reward = "lab.posttrain.mean_reward(model, prompts, reward[, opts]) -> number: mean reward of sampled completions",
  cost = "lab.posttrain.cost(opts) -> table: FLOPs, memory and time of a post-training recipe, by phase",
}
