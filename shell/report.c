/* What every rank printed and raised after a chunk, shown grouped on rank 0 (see report.h). */
#define _GNU_SOURCE
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grouped.h"
#include "live.h"
#include "runtime/lab_control.h"

char *with_rank_prefix(int rank, const char *msg) {
  char head[32];
  int hl = snprintf(head, sizeof head, "rank %d: ", rank);
  char *out = malloc(strlen(msg) + (size_t)hl + 1);
  if (!out) return NULL;
  if (strncmp(msg, head, (size_t)hl) == 0) strcpy(out, msg);
  else sprintf(out, "%s%s", head, msg);
  return out;
}

/* the length of an error's message without its traceback ("msg\nstack traceback:\n...") */
static int64_t without_traceback(const char *err, int64_t len) {
  const char *tb = memmem(err, (size_t)len, "\nstack traceback:", 17);
  return tb ? tb - err : len;
}

/* Brings every rank's output and error to rank 0 and shows them. Errors come in two kinds: a
 * rank's own, and a wait given up because another rank had stopped (fail fast: it follows from
 * that rank's error). Own errors are shown first, with their traceback when others followed
 * from them; the rest after. */
void report_all(FILE *to, const char *out, long long out_len, const char *err) {
  int rank = lab_ctl_rank(), size = lab_ctl_size();
  char *err_text = NULL;
  if (err) {
    char head[32];
    int hl = snprintf(head, sizeof head, "rank %d: ", rank);
    const char *msg = strncmp(err, head, (size_t)hl) == 0 ? err + hl : err;
    /* the first byte says which kind: 'O' own, 'F' followed from another rank's */
    if (asprintf(&err_text, "%cerror: %s", lab_board_gave_up_for_member() ? 'F' : 'O', msg) < 0) err_text = NULL;
  }
  char *all_out = NULL, *all_err = NULL;
  int64_t *out_lens = NULL, *err_lens = NULL;
  lab_ctl_gather(out ? out : "", out ? out_len : 0, &all_out, &out_lens);
  lab_ctl_gather(err_text ? err_text : "", err_text ? (int64_t)strlen(err_text) : 0, &all_err, &err_lens);
  if (rank == 0) {
    int64_t o = 0; /* leave out what was shown while the chunk ran */
    for (int r = 0; r < size; r++) {
      int64_t skip = live_shown(r) < out_lens[r] ? live_shown(r) : out_lens[r];
      memmove(all_out + o, all_out + o + skip, (size_t)(out_lens[r] - skip));
      int64_t rest = 0;
      for (int q = r + 1; q < size; q++) rest += out_lens[q];
      memmove(all_out + o + out_lens[r] - skip, all_out + o + out_lens[r], (size_t)rest);
      out_lens[r] -= skip;
      o += out_lens[r];
    }
    print_gathered(to, size, all_out, out_lens, size > 1);
    /* own errors first (with their traceback if any wait followed from them), then the rest */
    const char **own = calloc((size_t)size, sizeof *own), **followed = calloc((size_t)size, sizeof *followed);
    int64_t *own_len = calloc((size_t)size, sizeof *own_len), *followed_len = calloc((size_t)size, sizeof *followed_len);
    int any_followed = 0;
    o = 0;
    for (int r = 0; own && followed && own_len && followed_len && r < size; r++) {
      const char *e = all_err + o;
      o += err_lens[r];
      if (err_lens[r] == 0) continue;
      if (e[0] == 'F') followed[r] = e + 1, followed_len[r] = err_lens[r] - 1, any_followed = 1;
      else own[r] = e + 1, own_len[r] = err_lens[r] - 1;
    }
    for (int r = 0; own && followed && own_len && followed_len && r < size; r++) {
      if (!own[r]) own[r] = "";
      if (!followed[r]) followed[r] = "";
      if (!any_followed) own_len[r] = without_traceback(own[r], own_len[r]);
      followed_len[r] = without_traceback(followed[r], followed_len[r]); /* where it waited says nothing new */
    }
    if (own && followed && own_len && followed_len) {
      print_grouped(to, size, own, own_len, size > 1);
      print_grouped(to, size, followed, followed_len, size > 1);
    }
    free(own);
    free(followed);
    free(own_len);
    free(followed_len);
    live_end();
  }
  free(all_out);
  free(all_err);
  free(out_lens);
  free(err_lens);
  free(err_text);
}
