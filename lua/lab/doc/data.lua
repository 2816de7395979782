-- Docstrings of lab.data (help(lab.data.text_batch)): lua/lab/data.lua.
return {
  text = "lab.data.text(path) -> corpus: a text file's bytes as a token stream",
  default_corpus = "lab.data.default_corpus([root]) -> corpus: this project's own sources as a text corpus",
  text_batch = "lab.data.text_batch(corpus, B, T) -> ids, targets: B random windows of T tokens and the next T",
  copy_task = "lab.data.copy_task(n, k) -> batch function: sequences to copy after a separator (k symbols)",
  add_task = "lab.data.add_task(n) -> batch function: n-digit additions a+b=sum as tokens",
  accuracy = "lab.data.accuracy(model, ids, targets) -> per_token, per_sequence: teacher-forced accuracy on scored positions",
}
