/* test-parity.c - the C engine against the PyTorch reference's goldens (tests/goldens), tensor
 * by tensor: every named intermediate of docs/MODEL.md §8 and the greedy continuation. */
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/backend.h"
#include "model/decoder.h"
#include "model/encoder.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"

/* Per element |a - b| <= atol + rtol * |ref|.
 * rtol = 1e-4: the engine is f32 and the reference f64; a value here is a few hundred products
 * deep (patch embedding 192 terms, attention over <= 59 keys, two blocks), whose accumulated
 * rounding is ~1e-6 relative (the reference's own f32 run may use at most 1/4 of the tolerance
 * on any golden, checked by make_goldens.py; 0.06 at worst today, a Δ map). 1e-4 leaves room
 * for other summation orders without hiding bugs: a wrong RoPE pairing, a missing bias or a
 * misplaced norm is >= 1e-2.
 * atol = 1e-5 * max|ref| of the tensor: elements near zero (a residual stream crossing zero)
 * carry the rounding of the tensor's large elements, not of their own size.
 * NaN or Inf always fail. The greedy ids must be identical (the goldens reject seeds whose top
 * two logits come within 1e-4 of each other at any step). */
#define RTOL 1e-4
#define ATOL_REL 1e-5

typedef struct {
    int ndim;
    gint64 shape[8];
    gsize numel;
    float *data;
} Tensor;

static void tensor_free(gpointer p)
{
    Tensor *t = p;
    g_free(t->data);
    g_free(t);
}

static Tensor *tensor_new(const float *data, int ndim, const gint64 *shape)
{
    Tensor *t = g_new0(Tensor, 1);
    t->ndim = MIN(ndim, 8);
    t->numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        t->shape[d] = shape[d];
        t->numel *= (gsize)shape[d];
    }
    t->data = g_memdup2(data, t->numel * sizeof(float));
    return t;
}

/* Named tensors the engine produced: taps, and the output structs' fields. */
typedef struct {
    GHashTable *taps; /* name -> Tensor */
    GHashTable *outs; /* name -> Tensor */
    int duplicates;
} Collected;

static void tap_cb(const char *name, const float *data, int ndim, const gint64 *shape,
                   gpointer user_data)
{
    Collected *c = user_data;
    /* the first value under a name wins (an engine tapping its Δ pass too would repeat names) */
    if (g_hash_table_contains(c->taps, name)) {
        c->duplicates++;
        return;
    }
    g_hash_table_insert(c->taps, g_strdup(name), tensor_new(data, ndim, shape));
}

static void add_out(Collected *c, const char *name, const float *data, gint64 rows, gint64 cols)
{
    gint64 shape[2] = { rows, cols };
    g_hash_table_insert(c->outs, g_strdup(name), tensor_new(data, cols > 0 ? 2 : 1, shape));
}

/* A golden tensor as f32 (goldens are written as F32). */
static float *golden_floats(const ClSafeTensor *t, GError **error)
{
    if (t->dtype != CL_DTYPE_F32) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE, "%s: dtype %s, goldens are F32",
                    t->name, cl_dtype_name(t->dtype));
        return NULL;
    }
    float *v = g_new(float, MAX(t->numel, 1));
    memcpy(v, t->data, t->numel * sizeof(float));
    return v;
}

static char *shape_str(int ndim, const gint64 *shape)
{
    GString *s = g_string_new("[");
    for (int d = 0; d < ndim; d++)
        g_string_append_printf(s, "%s%" G_GINT64_FORMAT, d ? "," : "", shape[d]);
    g_string_append_c(s, ']');
    return g_string_free(s, FALSE);
}

/* Same shape up to dimensions of size 1. */
static gboolean same_shape(int na, const gint64 *a, int nb, const gint64 *b)
{
    int i = 0, j = 0;
    for (;;) {
        while (i < na && a[i] == 1)
            i++;
        while (j < nb && b[j] == 1)
            j++;
        if (i == na || j == nb)
            return i == na && j == nb;
        if (a[i++] != b[j++])
            return FALSE;
    }
}

/* Compares `got` with the golden `ref`; prints one line; returns the max relative error
 * (max|a-b| / max|ref|) through *max_rel and TRUE when every element is within tolerance. */
static gboolean compare(const char *name, const char *source, const Tensor *got,
                        const ClSafeTensor *ref_t, const float *ref, double *max_rel)
{
    g_autofree char *gs = shape_str(got->ndim, got->shape);
    g_autofree char *rs = shape_str(ref_t->ndim, ref_t->shape);
    if (got->numel != ref_t->numel ||
        !same_shape(got->ndim, got->shape, ref_t->ndim, ref_t->shape)) {
        g_print("  FAIL %-26s %s: shape %s, golden %s\n", name, source, gs, rs);
        *max_rel = INFINITY;
        return FALSE;
    }
    double ref_max = 0.0;
    for (gsize i = 0; i < got->numel; i++)
        ref_max = MAX(ref_max, fabs((double)ref[i]));
    const double atol = ATOL_REL * ref_max;
    double max_diff = 0.0, worst_ratio = 0.0;
    gsize n_bad = 0, worst = 0, n_nonfinite = 0;
    for (gsize i = 0; i < got->numel; i++) {
        double a = got->data[i], b = ref[i];
        if (!isfinite(a) || !isfinite(b)) { /* a non-finite golden is a broken golden */
            n_nonfinite++;
            n_bad++;
            worst = i;
            worst_ratio = INFINITY;
            continue;
        }
        double diff = fabs(a - b), tol = atol + RTOL * fabs(b);
        max_diff = MAX(max_diff, diff);
        if (diff > tol)
            n_bad++;
        double ratio = tol > 0 ? diff / tol : (diff > 0 ? INFINITY : 0.0);
        if (ratio > worst_ratio) {
            worst_ratio = ratio;
            worst = i;
        }
    }
    *max_rel = n_nonfinite ? INFINITY : (ref_max > 0 ? max_diff / ref_max : max_diff);
    if (n_bad == 0) {
        g_print("  ok   %-26s %-4s %-10s max rel err %.3g (%.2f of tolerance)\n", name, source, rs,
                *max_rel, worst_ratio);
        return TRUE;
    }
    g_print("  FAIL %-26s %-4s %-10s max rel err %.3g: %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT
            " elements out of tolerance (%" G_GSIZE_FORMAT " not finite); worst [%" G_GSIZE_FORMAT
            "] = %.9g, golden %.9g\n",
            name, source, rs, *max_rel, n_bad, got->numel, n_nonfinite, worst,
            (double)got->data[worst], (double)ref[worst]);
    return FALSE;
}

static char *file_sha256(const char *path, GError **error)
{
    g_autofree char *contents = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &contents, &len, error))
        return NULL;
    return g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)contents, len);
}

/* The golden's prompt (ids stored as F32) and greedy ids; FALSE when not integral ids. */
static gint32 *golden_ids(const ClSafeTensor *t, int vocab, GError **error)
{
    g_autofree float *v = golden_floats(t, error);
    if (!v)
        return NULL;
    gint32 *ids = g_new(gint32, MAX(t->numel, 1));
    for (gsize i = 0; i < t->numel; i++) {
        if (!(v[i] >= 0 && v[i] < vocab && v[i] == floorf(v[i]))) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE,
                        "%s[%" G_GSIZE_FORMAT "] = %g is not a token id", t->name, i, v[i]);
            g_free(ids);
            return NULL;
        }
        ids[i] = (gint32)v[i];
    }
    return ids;
}

static void rm_rf_tmp(const char *dir, const char *file)
{
    if (file)
        g_unlink(file);
    if (dir)
        g_rmdir(dir);
}

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        g_print("  FAIL " __VA_ARGS__);                                                            \
        g_print("\n");                                                                             \
        return FALSE;                                                                              \
    } while (0)

static double overall_max_rel = 0.0;

/* Runs one golden; TRUE when everything matches. */
static gboolean test_golden(const char *path)
{
    g_autoptr(GError) err = NULL;
    g_print("golden %s\n", path);

    g_autoptr(ClSafetensors) st = cl_safetensors_open(path, &err);
    if (!st)
        FAIL("cannot read the golden: %s", err->message);
    const char *cfg_json = cl_safetensors_metadata(st, "changelens.config");
    const char *seed_str = cl_safetensors_metadata(st, "golden.seed");
    const char *sha_want = cl_safetensors_metadata(st, "golden.model_sha256");
    if (!cfg_json || !seed_str || !sha_want)
        FAIL("golden lacks changelens.config / golden.seed / golden.model_sha256 metadata");
    ClModelConfig cfg;
    if (!cl_model_config_from_json(&cfg, cfg_json, &err))
        FAIL("golden config: %s", err->message);
    guint64 seed = g_ascii_strtoull(seed_str, NULL, 10);

    /* the same weights as the reference: re-created from the seed, pinned by the file hash */
    g_autoptr(ClModel) model = cl_model_new_random(&cfg, seed, &err);
    if (!model)
        FAIL("cl_model_new_random: %s", err->message);
    g_autofree char *tmpdir = g_dir_make_tmp("cl-parity-XXXXXX", &err);
    if (!tmpdir)
        FAIL("temporary folder: %s", err->message);
    g_autofree char *mpath = g_build_filename(tmpdir, "model.safetensors", NULL);
    gboolean saved = cl_model_save(model, mpath, "F32", &err);
    g_autofree char *sha = saved ? file_sha256(mpath, &err) : NULL;
    rm_rf_tmp(tmpdir, mpath);
    if (!sha)
        FAIL("saving the model: %s", err->message);
    if (strcmp(sha, sha_want) != 0)
        FAIL("model init changed: regenerate goldens with tests/reference/make_goldens.py "
             "(seed %s gives sha256 %s, the golden was made from %s)",
             seed_str, sha, sha_want);

    /* inputs */
    const ClSafeTensor *px_t = cl_safetensors_get(st, "input.pixels");
    const ClSafeTensor *pr_t = cl_safetensors_get(st, "input.prompt");
    const ClSafeTensor *gr_t = cl_safetensors_get(st, "dec.greedy");
    if (!px_t || !pr_t || !gr_t)
        FAIL("golden lacks input.pixels / input.prompt / dec.greedy");
    const gsize img = (gsize)cfg.channels * cfg.image_size * cfg.image_size;
    if (px_t->ndim != 4 || px_t->shape[1] != cfg.channels || px_t->shape[2] != cfg.image_size ||
        px_t->shape[3] != cfg.image_size || px_t->shape[0] < 1)
        FAIL("input.pixels has the wrong shape for the config");
    const int n_images = (int)px_t->shape[0];
    g_autofree float *pixels = golden_floats(px_t, &err);
    g_autofree gint32 *prompt = pixels ? golden_ids(pr_t, cfg.vocab_size, &err) : NULL;
    g_autofree gint32 *greedy_want = prompt ? golden_ids(gr_t, cfg.vocab_size, &err) : NULL;
    if (!greedy_want)
        FAIL("%s", err->message);
    const int n_prompt = (int)pr_t->numel, n_greedy = (int)gr_t->numel;
    int n_image_ids = 0;
    for (int i = 0; i < n_prompt; i++)
        n_image_ids += prompt[i] == CL_TOKEN_IMAGE;
    if (n_image_ids != n_images)
        FAIL("input.prompt has %d <image> ids for %d images", n_image_ids, n_images);

    Collected col = {
        .taps = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, tensor_free),
        .outs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, tensor_free),
    };
    g_autoptr(GHashTable) taps = col.taps;
    g_autoptr(GHashTable) outs = col.outs;

    /* encoder: the images as one sequence, with Δ maps */
    g_autoptr(ClBackend) be = cl_backend_cpu_new(0);
    g_autoptr(ClEncoderState) state = cl_encoder_state_new(model);
    const int M = cl_config_n_visual(&cfg), N = cl_config_n_patches(&cfg);
    const gsize E = (gsize)cfg.dec_dim, V = (gsize)cfg.vocab_size;
    g_autofree float *visual = g_new0(float, (gsize)n_images * M * E);
    for (int t = 0; t < n_images; t++) {
        ClEncoderOutput out = { 0 };
        if (!cl_encoder_forward(be, model, state, pixels + t * img, t, TRUE, tap_cb, &col, &out,
                                &err)) {
            cl_encoder_output_clear(&out);
            FAIL("cl_encoder_forward(image %d): %s", t, err->message);
        }
        const int got_m = out.n_visual, got_n = out.n_patches;
        if (got_m != M || got_n != N || !out.visual) {
            cl_encoder_output_clear(&out);
            FAIL("encoder output sizes M=%d N=%d, config says %d, %d", got_m, got_n, M, N);
        }
        memcpy(visual + (gsize)t * M * E, out.visual, (gsize)M * E * sizeof(float));
        g_autofree char *vname = g_strdup_printf("img%d.visual", t);
        add_out(&col, vname, out.visual, M, (gint64)E);
        if (out.delta) {
            g_autofree char *dname = g_strdup_printf("img%d.delta", t);
            add_out(&col, dname, out.delta, M, 0);
        }
        for (int l = 0; out.update_norm && l < cfg.enc_depth; l++) {
            g_autofree char *uname = g_strdup_printf("img%d.enc.%d.update_norm", t, l);
            add_out(&col, uname, out.update_norm + (gsize)l * N, N, 0);
        }
        cl_encoder_output_clear(&out);
    }

    /* decoder: the prompt with each <image> replaced by its M visual rows, then greedy */
    GArray *seq = g_array_new(FALSE, FALSE, sizeof(gint32));
    for (int i = 0; i < n_prompt; i++) {
        gint32 id = prompt[i];
        for (int m = 0; m < (id == CL_TOKEN_IMAGE ? M : 1); m++) {
            gint32 v = id == CL_TOKEN_IMAGE ? CL_DECODER_VISUAL : id;
            g_array_append_val(seq, v);
        }
    }
    const int T = (int)seq->len;
    g_autofree gint32 *seq_ids = (gint32 *)g_array_free(seq, FALSE);
    g_autoptr(ClKVCache) cache = cl_kv_cache_new(model, T + n_greedy + 1);
    g_autofree float *logits = g_new(float, V);
    if (!cl_decoder_forward(be, model, cache, seq_ids, T, visual, logits, NULL, tap_cb, &col, &err))
        FAIL("cl_decoder_forward(prompt of %d positions): %s", T, err->message);
    add_out(&col, "dec.logits", logits, (gint64)V, 0);
    g_autofree gint32 *greedy = g_new(gint32, MAX(n_greedy, 1));
    for (int k = 0; k < n_greedy; k++) {
        gint32 best = 0;
        for (gsize v = 1; v < V; v++)
            if (logits[v] > logits[best])
                best = (gint32)v;
        greedy[k] = best;
        if (k + 1 < n_greedy &&
            !cl_decoder_forward(be, model, cache, &best, 1, NULL, logits, NULL, NULL, NULL, &err))
            FAIL("cl_decoder_forward(greedy step %d): %s", k, err->message);
    }

    /* compare every golden tensor with what the engine tapped and returned */
    gboolean ok = TRUE;
    double case_max = 0.0;
    int n_compared = 0;
    for (guint i = 0; i < st->tensors->len; i++) {
        const ClSafeTensor *ref_t = g_ptr_array_index(st->tensors, i);
        const char *name = ref_t->name;
        if (g_str_has_prefix(name, "input.") || strcmp(name, "dec.greedy") == 0)
            continue;
        g_autofree float *ref = golden_floats(ref_t, &err);
        if (!ref)
            FAIL("%s", err->message);
        Tensor *tap = g_hash_table_lookup(taps, name);
        Tensor *out = g_hash_table_lookup(outs, name);
        if (!tap && !out) {
            g_print("  FAIL %-26s the engine produced no such tensor\n", name);
            ok = FALSE;
            continue;
        }
        double r;
        if (tap) {
            ok &= compare(name, "tap", tap, ref_t, ref, &r);
            case_max = MAX(case_max, r);
            n_compared++;
        }
        if (out) {
            ok &= compare(name, "out", out, ref_t, ref, &r);
            case_max = MAX(case_max, r);
            n_compared++;
        }
    }
    /* engine taps the golden does not have: shown, not failed (names outside §8 are allowed) */
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, taps);
    while (g_hash_table_iter_next(&it, &key, NULL))
        if (!cl_safetensors_get(st, key))
            g_print("  note %-26s tapped by the engine, not in the golden\n", (const char *)key);
    if (col.duplicates)
        g_print("  note %d tap name(s) repeated by the engine; the first value was compared\n",
                col.duplicates);

    GString *gw = g_string_new(NULL), *gg = g_string_new(NULL);
    gboolean same = TRUE;
    for (int k = 0; k < n_greedy; k++) {
        g_string_append_printf(gw, "%s%d", k ? " " : "", greedy_want[k]);
        g_string_append_printf(gg, "%s%d", k ? " " : "", greedy[k]);
        same &= greedy[k] == greedy_want[k];
    }
    g_print("  %s %-26s %s%s%s\n", same ? "ok  " : "FAIL", "dec.greedy", gg->str,
            same ? "" : ", golden ", same ? "" : gw->str);
    g_string_free(gw, TRUE);
    g_string_free(gg, TRUE);
    ok &= same;

    overall_max_rel = MAX(overall_max_rel, case_max);
    g_print("  %s: %d comparisons, max rel err %.3g\n", ok ? "PASS" : "FAIL", n_compared, case_max);
    return ok;
}

static int cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    /* argv: optional golden files to run instead of every file in $CL_GOLDENS */
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
    for (int i = 1; i < argc; i++)
        g_ptr_array_add(files, g_strdup(argv[i]));
    const char *dir = g_getenv("CL_GOLDENS");
    if (files->len == 0) {
        if (!dir || !*dir) {
            g_printerr("test-parity: CL_GOLDENS is not set (tests/meson.build sets it)\n");
            return 1;
        }
        g_autoptr(GError) err = NULL;
        g_autoptr(GDir) d = g_dir_open(dir, 0, &err);
        if (!d) {
            g_printerr("test-parity: %s\n", err->message);
            return 1;
        }
        for (const char *n; (n = g_dir_read_name(d));)
            if (g_str_has_suffix(n, ".safetensors"))
                g_ptr_array_add(files, g_build_filename(dir, n, NULL));
    }
    if (files->len == 0) {
        /* a parity test with nothing to compare must not pass */
        g_printerr("test-parity: no goldens in %s (tests/reference/make_goldens.py)\n", dir);
        return 1;
    }
    g_ptr_array_sort(files, cmp_str);
    guint n_failed = 0;
    for (guint i = 0; i < files->len; i++)
        if (!test_golden(g_ptr_array_index(files, i)))
            n_failed++;
    g_print("parity: %u of %u goldens pass; overall max rel err %.3g\n", files->len - n_failed,
            files->len, overall_max_rel);
    return n_failed ? 1 : 0;
}
