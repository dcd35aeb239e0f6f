/* cli-case.c - `changelens-cli case …`: the case database from the command line and scripts.
 * The shapes scripts rely on: `case new NAME` prints the new id; `list`, `show` and `search`
 * take --json; every other result goes to stderr as one line. The database is --db PATH, else
 * $CHANGELENS_DB, else the user data dir (core/casedb). Exit status: 0 done, 1 failure (the
 * message says what and what to do), 2 usage error. */
#include <json-glib/json-glib.h>
#include "jsondepth.h"
#include "jsonnum.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/backend.h"
#include "casedb/casedb.h"
#include "casedb/caserun.h"
#include "jsonbuild.h"
#include "cl-config.h"
#include "cli.h"
#include "model/describe.h"
#include "report/report.h"

#define PROG "changelens-cli case"

static const char usage_text[] =
    "Usage: changelens-cli case [--db PATH] COMMAND …\n"
    "\n"
    "Commands:\n"
    "  new NAME                        create a case; prints its id\n"
    "  add ID FILE…                    add images (every frame of a multi-frame file) in order\n"
    "  list [--json]                   every case, most recently changed first\n"
    "  show ID [--json]                images (and whether their files moved or changed), runs,\n"
    "                                  the description and its history, notes\n"
    "  search QUERY… [--json]          full-text search: names, descriptions, notes, metadata\n"
    "  describe ID [OPTIONS]           run the model on the case's images; records the run,\n"
    "                                  the description (streamed) and the heatmaps\n"
    "  edit ID TEXT|-                  a new version of the description (- reads stdin)\n"
    "  accept ID / reject ID           a new version with that status\n"
    "  note ID TEXT                    add a note\n"
    "  key ID IMAGE_ID [--label TEXT]  mark a key image\n"
    "  export ID --format pdf|html|json --out PATH [--no-deidentify] [--paper a4|letter]\n"
    "         [--burned-in-checked]\n"
    "  delete ID                       delete the case (the audit log keeps a record)\n"
    "\n"
    "The database: --db PATH, else $CHANGELENS_DB, else ~/.local/share/changelens/cases.db.\n"
    "A postgresql://USER@HOST:PORT/DATABASE address in its place is a database on a\n"
    "PostgreSQL server that several reviewers share (its password in ~/.pgpass).\n"
    "Run 'changelens-cli case COMMAND --help' for a command's options.\n";

/* ---- shared ---------------------------------------------------------------------------------- */

static const char *db_path_opt; /* --db, taken out of argv before the command parses its own */

static int fail(const char *what, const GError *err)
{
    if (what)
        fprintf(stderr, "%s %s: %s\n", PROG, what, err ? err->message : "failed");
    else
        fprintf(stderr, "%s: %s\n", PROG, err ? err->message : "failed");
    return 1;
}

static int usage(const char *cmd, const char *msg)
{
    g_autofree char *pname = g_strdup_printf("%s %s", PROG, cmd);
    return cl_cli_usage_error(pname, "%s", msg);
}

static ClCaseDb *open_db(gboolean write, GError **error)
{
    g_autofree char *path = db_path_opt ? g_strdup(db_path_opt) : cl_casedb_default_path();
    /* reading commands never create a database; writing ones create it on first use */
    ClCaseDbOpenFlags flags = write ? CL_CASEDB_OPEN_DEFAULT : CL_CASEDB_OPEN_NO_CREATE;
    if (!write && strcmp(path, ":memory:") != 0 && !cl_casedb_is_server(path) &&
        !g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_NOT_FOUND,
                    "there is no case database at %s yet (create a case with 'case new NAME', "
                    "or pass --db PATH)",
                    path);
        return NULL;
    }
    return cl_casedb_open(path, flags, error);
}

/* A case id argument: a positive integer. */
static gboolean parse_id(const char *s, gint64 *out)
{
    return cl_cli_parse_int(NULL, s, 1, G_MAXINT64, out, NULL);
}

/* Parses the command's options (ints: its whole-number ones, or NULL); leaves the positional
 * arguments in argc, argv (argv[0] kept). Returns -1 to go on, else the exit status. */
static int parse(const char *cmd, const char *params, const char *summary, GOptionEntry *entries,
                 const ClCliIntOption *ints, int *argc, char ***argv)
{
    g_autofree char *pname = g_strdup_printf("%s %s", PROG, cmd);
    g_autoptr(GOptionContext) ctx = g_option_context_new(params);
    g_option_context_set_summary(ctx, summary);
    if (entries)
        cl_cli_add_entries(ctx, entries, ints);
    g_set_prgname(pname);
    return cl_cli_parse_options(ctx, pname, argc, argv) ? -1 : CL_CLI_EXIT_USAGE;
}

static char *read_stdin_text(GError **error)
{
    g_autoptr(GString) s = g_string_new(NULL);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0)
        g_string_append_len(s, buf, (gssize)n);
    if (ferror(stdin)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "cannot read the text from stdin");
        return NULL;
    }
    /* a trailing newline from `echo` or an editor is not part of the text */
    while (s->len && (s->str[s->len - 1] == '\n' || s->str[s->len - 1] == '\r'))
        g_string_truncate(s, s->len - 1);
    return g_string_free(g_steal_pointer(&s), FALSE);
}

/* ---- new / add / delete ---------------------------------------------------------------------- */

static int cmd_new(int argc, char **argv)
{
    int rc = parse("new", "NAME - create a case and print its id", NULL, NULL, NULL, &argc, &argv);
    if (rc >= 0)
        return rc;
    if (argc != 2)
        return usage("new", "give the case's name (quote it if it has spaces)");
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) db = open_db(TRUE, &err);
    if (!db)
        return fail("new", err);
    gint64 id = 0;
    if (!cl_casedb_case_new(db, argv[1], &id, &err))
        return fail("new", err);
    printf("%" G_GINT64_FORMAT "\n", id);
    return 0;
}

static int cmd_add(int argc, char **argv)
{
    gboolean first_frame = FALSE;
    GOptionEntry entries[] = {
        { "first-frame", 0, 0, G_OPTION_ARG_NONE, &first_frame,
          "Add only the first frame of multi-frame files", NULL },
        { NULL },
    };
    int rc = parse("add", "ID FILE… - add images to a case, in order", NULL, entries, NULL, &argc,
                   &argv);
    if (rc >= 0)
        return rc;
    gint64 id;
    if (argc < 3)
        return usage("add", "give the case id and at least one image file");
    if (!parse_id(argv[1], &id))
        return usage("add", "the case id must be a positive number");
    g_autoptr(GError) err = NULL;
    /* every file is read and hashed before anything is written: all or none */
    g_autoptr(GPtrArray) images =
        g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_image_free);
    for (int i = 2; i < argc; i++) {
        ClCaseImage *img = g_new0(ClCaseImage, 1);
        if (!cl_case_image_from_file(argv[i], 0, img, &err)) {
            cl_case_image_free(img);
            fprintf(stderr, "%s add: %s; nothing was added\n", PROG, err->message);
            return 1;
        }
        guint n_frames = img->n_frames ? img->n_frames : 1;
        g_ptr_array_add(images, img);
        for (guint f = 1; !first_frame && f < n_frames; f++) {
            ClCaseImage *fr = g_new0(ClCaseImage, 1);
            if (!cl_case_image_from_file(argv[i], f, fr, &err)) {
                cl_case_image_free(fr);
                fprintf(stderr, "%s add: %s; nothing was added\n", PROG, err->message);
                return 1;
            }
            g_ptr_array_add(images, fr);
        }
    }
    g_autoptr(ClCaseDb) db = open_db(TRUE, &err);
    if (!db)
        return fail("add", err);
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(gint64));
    if (!cl_casedb_images_add(db, id, images, ids, &err))
        return fail("add", err);
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, &err);
    fprintf(stderr, "%s add: added %u image%s to case %" G_GINT64_FORMAT " (%u in all)\n", PROG,
            images->len, images->len == 1 ? "" : "s", id, c ? c->images->len : 0);
    return 0;
}

static int cmd_delete(int argc, char **argv)
{
    int rc =
        parse("delete", "ID - delete a case and everything in it", NULL, NULL, NULL, &argc, &argv);
    if (rc >= 0)
        return rc;
    gint64 id;
    if (argc != 2 || !parse_id(argv[1], &id))
        return usage("delete", "give one case id");
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) db = open_db(TRUE, &err);
    if (!db || !cl_casedb_case_delete(db, id, &err))
        return fail("delete", err);
    fprintf(stderr, "%s delete: deleted case %" G_GINT64_FORMAT "\n", PROG, id);
    return 0;
}

/* ---- list / search ---------------------------------------------------------------------------- */

static int cmd_list(int argc, char **argv)
{
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print a JSON array", NULL },
        { NULL },
    };
    int rc = parse("list", "- every case, most recently changed first", NULL, entries, NULL, &argc,
                   &argv);
    if (rc >= 0)
        return rc;
    if (argc != 1)
        return usage("list", "takes no arguments");
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) db = open_db(FALSE, &err);
    if (!db)
        return fail("list", err);
    g_autoptr(GPtrArray) cases = cl_casedb_list(db, &err);
    if (!cases)
        return fail("list", err);
    if (json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_array(b);
        for (guint i = 0; i < cases->len; i++) {
            const ClCaseSummary *s = g_ptr_array_index(cases, i);
            json_builder_begin_object(b);
            cl_json_int(b, "id", s->id);
            cl_json_str(b, "name", s->name);
            cl_json_int(b, "images", s->n_images);
            cl_json_str(b, "modalities", s->modalities);
            cl_json_str(b, "status", s->has_description ? cl_desc_status_name(s->status) : NULL);
            cl_json_str(b, "created_at", s->created_at);
            cl_json_str(b, "updated_at", s->updated_at);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        cl_cli_print_json(b);
        return 0;
    }
    if (cases->len == 0) {
        fprintf(stderr, "%s list: no cases yet (create one with 'case new NAME')\n", PROG);
        return 0;
    }
    printf("%6s  %-9s  %6s  %-10s  %-24s  %s\n", "ID", "STATUS", "IMAGES", "MODALITY", "UPDATED",
           "NAME");
    for (guint i = 0; i < cases->len; i++) {
        const ClCaseSummary *s = g_ptr_array_index(cases, i);
        g_autofree char *name = cl_cli_printable(s->name);
        printf("%6" G_GINT64_FORMAT "  %-9s  %6u  %-10s  %-24s  %s\n", s->id,
               s->has_description ? cl_desc_status_name(s->status) : "-", s->n_images,
               s->modalities && *s->modalities ? s->modalities : "-", s->updated_at, name);
    }
    return 0;
}

static int cmd_search(int argc, char **argv)
{
    gboolean json = FALSE;
    gint64 limit = 50;
    const ClCliIntOption ints[] = { { "limit", 'n', 1, G_MAXUINT32, &limit }, { NULL } };
    GOptionEntry entries[] = {
        { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print a JSON array", NULL },
        CL_CLI_INT_ENTRY("limit", 'n', "At most N cases (default 50)", "N"),
        { NULL },
    };
    int rc = parse("search",
                   "QUERY… - full-text search over names, descriptions, notes and "
                   "image metadata (every word must match)",
                   NULL, entries, ints, &argc, &argv);
    if (rc >= 0)
        return rc;
    if (argc < 2)
        return usage("search", "give the words to search for");
    g_autofree char *query = g_strjoinv(" ", argv + 1);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) db = open_db(FALSE, &err);
    if (!db)
        return fail("search", err);
    g_autoptr(GPtrArray) hits = cl_casedb_search(db, query, (guint)limit, &err);
    if (!hits)
        return fail("search", err);
    if (json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_array(b);
        for (guint i = 0; i < hits->len; i++) {
            const ClCaseSearchHit *h = g_ptr_array_index(hits, i);
            json_builder_begin_object(b);
            cl_json_int(b, "id", h->case_id);
            cl_json_str(b, "name", h->case_name);
            cl_json_str(b, "field", h->field);
            cl_json_str(b, "snippet", h->snippet);
            json_builder_set_member_name(b, "rank");
            json_builder_add_double_value(b, cl_json_double(isfinite(h->rank) ? h->rank : 0.0));
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        cl_cli_print_json(b);
        return 0;
    }
    for (guint i = 0; i < hits->len; i++) {
        const ClCaseSearchHit *h = g_ptr_array_index(hits, i);
        g_autofree char *name = cl_cli_printable(h->case_name);
        g_autofree char *snip = cl_cli_printable(h->snippet);
        for (char *p = snip; *p; p++)
            if (*p == '\n' || *p == '\t')
                *p = ' ';
        printf("%6" G_GINT64_FORMAT "  %s\n        %s: %s\n", h->case_id, name, h->field, snip);
    }
    if (hits->len == 0)
        fprintf(stderr, "%s search: nothing matches\n", PROG);
    return 0;
}

/* ---- show ------------------------------------------------------------------------------------ */

static void show_text(const ClCase *c)
{
    g_autofree char *name = cl_cli_printable(c->summary.name);
    printf("Case %" G_GINT64_FORMAT ": %s\n", c->summary.id, name);
    printf("  created %s, updated %s\n", c->summary.created_at, c->summary.updated_at);
    printf("\nImages (%u)\n", c->images->len);
    for (guint i = 0; i < c->images->len; i++) {
        const ClCaseImage *img = g_ptr_array_index(c->images, i);
        g_autofree char *path = cl_cli_printable(img->path);
        g_autofree char *frame =
            img->n_frames > 1 ? g_strdup_printf(" [frame %u/%u]", img->frame + 1, img->n_frames)
                              : g_strdup("");
        printf("  %u. #%" G_GINT64_FORMAT " %s%s\n     %s %s%s%u × %u, sha256 %.16s…, %s%s\n",
               i + 1, img->id, path, frame, img->format ? img->format : "?",
               img->modality ? img->modality : "", img->modality ? ", " : "", img->width,
               img->height, img->sha256 ? img->sha256 : "", cl_file_state_name(img->file_state),
               img->file_state == CL_FILE_MISSING   ? " (moved or deleted)"
               : img->file_state == CL_FILE_CHANGED ? " (its content changed since it was added)"
                                                    : "");
    }
    const ClCaseDescVersion *cur = cl_case_current_description(c);
    printf("\nDescription");
    if (!cur) {
        printf(": none yet (run 'case describe %" G_GINT64_FORMAT "' or 'case edit')\n",
               c->summary.id);
    } else {
        g_autofree char *text = cl_cli_printable(cur->text);
        g_autofree char *author = cl_cli_printable(cur->author);
        printf(" (version %u, %s, by %s, %s)\n%s\n", cur->version, cl_desc_status_name(cur->status),
               author, cur->created_at, text);
        const ClCaseDescVersion *gen = cl_case_generated_version(c, cur);
        if (gen && gen != cur && g_strcmp0(gen->text, cur->text) != 0) {
            g_autofree char *gtext = cl_cli_printable(gen->text);
            printf("\nGenerated by the model (version 1):\n%s\n", gtext);
        }
    }
    if (c->descriptions->len > 1) {
        printf("\nHistory\n");
        for (guint i = 0; i < c->descriptions->len; i++) {
            const ClCaseDescVersion *v = g_ptr_array_index(c->descriptions, i);
            g_autofree char *author = cl_cli_printable(v->author);
            glong chars = g_utf8_strlen(v->text, -1);
            printf("  #%" G_GINT64_FORMAT " v%u %-8s %-16s %s (%ld characters)\n",
                   v->description_id, v->version, cl_desc_status_name(v->status), author,
                   v->created_at, chars);
        }
    }
    if (c->runs->len) {
        printf("\nRuns\n");
        for (guint i = 0; i < c->runs->len; i++) {
            const ClCaseRun *r = g_ptr_array_index(c->runs, i);
            g_autofree char *model = cl_cli_printable(r->model_name);
            printf("  #%" G_GINT64_FORMAT " %s: %s (sha256 %.16s…), %s, seed %" G_GUINT64_FORMAT
                   ", %u tokens, %.0f ms\n",
                   r->id, r->created_at, model, r->model_sha256 ? r->model_sha256 : "",
                   r->device ? r->device : "?", r->seed, r->n_tokens, r->total_ms);
        }
    }
    if (c->notes->len) {
        printf("\nNotes\n");
        for (guint i = 0; i < c->notes->len; i++) {
            const ClCaseNote *n = g_ptr_array_index(c->notes, i);
            g_autofree char *text = cl_cli_printable(n->text);
            g_autofree char *author = cl_cli_printable(n->author);
            printf("  %s, %s: %s\n", n->created_at, author, text);
        }
    }
    if (c->key_images->len) {
        printf("\nKey images\n");
        for (guint i = 0; i < c->key_images->len; i++) {
            const ClCaseKeyImage *k = g_ptr_array_index(c->key_images, i);
            g_autofree char *label = cl_cli_printable(k->label);
            printf("  image #%" G_GINT64_FORMAT " %s\n", k->image_id, label);
        }
    }
}

static int cmd_show(int argc, char **argv)
{
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        { "json", 0, 0, G_OPTION_ARG_NONE, &json,
          "Print the whole case as JSON (the report schema, docs/REPORT.md, not de-identified)",
          NULL },
        { NULL },
    };
    int rc = parse("show", "ID - a case: images, runs, description and history, notes", NULL,
                   entries, NULL, &argc, &argv);
    if (rc >= 0)
        return rc;
    gint64 id;
    if (argc != 2 || !parse_id(argv[1], &id))
        return usage("show", "give one case id");
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) db = open_db(FALSE, &err);
    if (!db)
        return fail("show", err);
    ClCaseGetFlags flags = CL_CASE_CHECK_FILES | (json ? CL_CASE_HEATMAP_DATA : 0);
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, flags, &err);
    if (!c)
        return fail("show", err);
    if (json) {
        ClReportOptions o;
        cl_report_options_init(&o, c);
        o.format = CL_REPORT_JSON;
        o.deidentify = FALSE;
        g_autofree char *out = cl_report_to_json(c, &o, NULL, &err);
        if (!out)
            return fail("show", err);
        printf("%s\n", out);
        return 0;
    }
    show_text(c);
    return 0;
}

/* ---- edit / accept / reject / note / key ------------------------------------------------------ */

static int cmd_edit(int argc, char **argv)
{
    g_autofree char *author = NULL;
    gint64 base = 0;
    GOptionEntry entries[] = {
        { "author", 0, 0, G_OPTION_ARG_STRING, &author, "Who edits (default: the user name)",
          "NAME" },
        { "base", 0, 0, G_OPTION_ARG_INT64, &base,
          "The version id the edit starts from: refused if the description changed since", "VID" },
        { NULL },
    };
    int rc = parse("edit", "ID TEXT|- - a new version of the case's description (- reads stdin)",
                   NULL, entries, NULL, &argc, &argv);
    if (rc >= 0)
        return rc;
    gint64 id;
    if (argc != 3 || !parse_id(argv[1], &id))
        return usage("edit", "give the case id and the new text (or - to read it from stdin)");
    g_autoptr(GError) err = NULL;
    g_autofree char *text = strcmp(argv[2], "-") == 0 ? read_stdin_text(&err) : g_strdup(argv[2]);
    if (!text)
        return fail("edit", err);
    g_autoptr(ClCaseDb) db = open_db(TRUE, &err);
    gint64 vid = 0;
    if (!db || !cl_casedb_description_edit(db, id, text, author, base, &vid, &err)) {
        /* the edit is the user's work: say plainly that it was not saved */
        fprintf(stderr, "%s edit: %s\n%s edit: the edit was NOT saved; the database is unchanged\n",
                PROG, err->message, PROG);
        return 1;
    }
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, NULL);
    const ClCaseDescVersion *cur = c ? cl_case_current_description(c) : NULL;
    fprintf(stderr,
            "%s edit: saved version %u (id %" G_GINT64_FORMAT ") of case %" G_GINT64_FORMAT
            "'s description, status draft\n",
            PROG, cur ? cur->version : 0, vid, id);
    return 0;
}

static int cmd_status(const char *cmd, ClDescStatus status, int argc, char **argv)
{
    g_autofree char *reviewer = NULL;
    gint64 base = 0;
    GOptionEntry entries[] = {
        { "reviewer", 0, 0, G_OPTION_ARG_STRING, &reviewer, "Who reviews (default: the user name)",
          "NAME" },
        { "base", 0, 0, G_OPTION_ARG_INT64, &base,
          "The version id the reviewer read: refused if the description changed since", "VID" },
        { NULL },
    };
    g_autofree char *params =
        g_strdup_printf("ID - mark the case's current description %s", cl_desc_status_name(status));
    int rc = parse(cmd, params, NULL, entries, NULL, &argc, &argv);
    if (rc >= 0)
        return rc;
    gint64 id;
    if (argc != 2 || !parse_id(argv[1], &id))
        return usage(cmd, "give one case id");
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) db = open_db(TRUE, &err);
    gint64 vid = 0;
    if (!db || !cl_casedb_description_set_status(db, id, status, reviewer, base, &vid, &err))
        return fail(cmd, err);
    fprintf(stderr,
            "%s %s: case %" G_GINT64_FORMAT "'s description is %s (version id %" G_GINT64_FORMAT
            ")\n",
            PROG, cmd, id, cl_desc_status_name(status), vid);
    return 0;
}

static int cmd_note(int argc, char **argv)
{
    gint64 image_id = 0;
    GOptionEntry entries[] = {
        { "image", 0, 0, G_OPTION_ARG_INT64, &image_id, "About this image (id from 'case show')",
          "IMAGE_ID" },
        { NULL },
    };
    int rc = parse("note", "ID TEXT|- - add a note to a case", NULL, entries, NULL, &argc, &argv);
    if (rc >= 0)
        return rc;
    gint64 id;
    if (argc != 3 || !parse_id(argv[1], &id))
        return usage("note", "give the case id and the note's text");
    g_autoptr(GError) err = NULL;
    g_autofree char *text = strcmp(argv[2], "-") == 0 ? read_stdin_text(&err) : g_strdup(argv[2]);
    if (!text)
        return fail("note", err);
    g_autoptr(ClCaseDb) db = open_db(TRUE, &err);
    gint64 nid = 0;
    if (!db || !cl_casedb_note_add(db, id, image_id, text, &nid, &err))
        return fail("note", err);
    fprintf(stderr, "%s note: added note %" G_GINT64_FORMAT " to case %" G_GINT64_FORMAT "\n", PROG,
            nid, id);
    return 0;
}

static int cmd_key(int argc, char **argv)
{
    g_autofree char *label = NULL;
    GOptionEntry entries[] = {
        { "label", 0, 0, G_OPTION_ARG_STRING, &label, "What the key image shows", "TEXT" },
        { NULL },
    };
    int rc =
        parse("key", "ID IMAGE_ID - mark a key image of a case", NULL, entries, NULL, &argc, &argv);
    if (rc >= 0)
        return rc;
    gint64 id, image_id;
    if (argc != 3 || !parse_id(argv[1], &id) || !parse_id(argv[2], &image_id))
        return usage("key", "give the case id and the image id (from 'case show')");
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) db = open_db(TRUE, &err);
    gint64 kid = 0;
    if (!db || !cl_casedb_key_image_add(db, id, image_id, label ? label : "", &kid, &err))
        return fail("key", err);
    fprintf(stderr,
            "%s key: image %" G_GINT64_FORMAT " is a key image of case %" G_GINT64_FORMAT "\n",
            PROG, image_id, id);
    return 0;
}

/* ---- export ----------------------------------------------------------------------------------- */

static int cmd_export(int argc, char **argv)
{
    g_autofree char *format = NULL, *out = NULL, *paper = NULL;
    gboolean no_deid = FALSE, deid = FALSE, checked = FALSE;
    GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &format, "pdf, html or json", "FORMAT" },
        { "out", 'o', 0, G_OPTION_ARG_FILENAME, &out, "The file to write", "PATH" },
        { "paper", 0, 0, G_OPTION_ARG_STRING, &paper, "PDF paper size: a4 (default) or letter",
          "SIZE" },
        { "no-deidentify", 0, 0, G_OPTION_ARG_NONE, &no_deid,
          "Keep names, IDs, dates and UIDs (de-identification is on by default for DICOM cases)",
          NULL },
        { "deidentify", 0, 0, G_OPTION_ARG_NONE, &deid,
          "De-identify a case without DICOM images too", NULL },
        { "burned-in-checked", 0, 0, G_OPTION_ARG_NONE, &checked,
          "The pixels of the images that may show burned-in text (BurnedInAnnotation YES, "
          "ultrasound) were looked at: a de-identified PDF or HTML report of them is written",
          NULL },
        { NULL },
    };
    int rc = parse("export", "ID - write a report of a case (PDF, HTML or JSON)", NULL, entries,
                   NULL, &argc, &argv);
    if (rc >= 0)
        return rc;
    gint64 id;
    if (argc != 2 || !parse_id(argv[1], &id))
        return usage("export", "give one case id");
    if (!format || !out)
        return usage("export", "--format and --out are required");
    if (deid && no_deid)
        return usage("export", "--deidentify and --no-deidentify exclude each other");
    ClReportFormat fmt;
    if (!cl_report_format_parse(format, &fmt))
        return usage("export", "--format must be pdf, html or json");
    ClPaperSize ps = CL_PAPER_A4;
    if (paper && !cl_paper_size_parse(paper, &ps))
        return usage("export", "--paper must be a4 or letter");
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) db = open_db(FALSE, &err);
    if (!db)
        return fail("export", err);
    g_autoptr(ClCase) c =
        cl_casedb_get_case(db, id, CL_CASE_HEATMAP_DATA | CL_CASE_CHECK_FILES, &err);
    if (!c)
        return fail("export", err);
    ClReportOptions o;
    cl_report_options_init(&o, c);
    o.format = fmt;
    o.paper = ps;
    if (no_deid)
        o.deidentify = FALSE;
    if (deid)
        o.deidentify = TRUE;
    o.burned_in_checked = checked;
    o.generator = "ChangeLens " CL_VERSION;
    g_autoptr(GPtrArray) warnings = g_ptr_array_new_with_free_func(g_free);
    if (!cl_report_export(c, &o, out, warnings, &err))
        return fail("export", err);
    for (guint i = 0; i < warnings->len; i++)
        fprintf(stderr, "%s export: warning: %s\n", PROG,
                (const char *)g_ptr_array_index(warnings, i));
    fprintf(stderr, "%s export: wrote %s (%s%s)\n", PROG, out, format,
            o.deidentify ? ", de-identified" : "");
    return 0;
}

/* ---- describe --------------------------------------------------------------------------------- */

static char *weights_sha256(const ClModel *m)
{
    return g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)m->arena,
                                       m->n_params * sizeof(float));
}

typedef struct {
    char *model_path, *random_init, *device, *prompt;
    gint64 seed, max_tokens, beam_size;
    gboolean delta;
    gint64 id;
} CaseDescribeArgs;

static void case_describe_args_clear(CaseDescribeArgs *a)
{
    cl_cli_free_all(&a->model_path, &a->random_init, &a->device, &a->prompt, NULL);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CaseDescribeArgs, case_describe_args_clear)

/* Returns -1 to go on, else the exit status. */
static int parse_describe_args(int argc, char **argv, CaseDescribeArgs *a)
{
    a->seed = -1, a->max_tokens = 256, a->beam_size = 1;
    const ClCliIntOption ints[] = {
        { "seed", 0, 0, G_MAXINT64, &a->seed },
        { "max-tokens", 'n', 1, G_MAXINT, &a->max_tokens },
        { "beam", 'b', 1, 64, &a->beam_size },
        { NULL },
    };
    GOptionEntry entries[] = {
        { "model", 'm', 0, G_OPTION_ARG_FILENAME, &a->model_path, "Model file (safetensors)",
          "FILE" },
        { "random-init", 0, 0, G_OPTION_ARG_STRING, &a->random_init,
          "An untrained model of this preset (tiny, base, large): its text is noise", "PRESET" },
        CL_CLI_INT_ENTRY("seed", 0, "Seed of --random-init (default 0)", "N"),
        { "device", 'd', 0, G_OPTION_ARG_STRING, &a->device, "auto (default), cpu or cuda",
          "DEVICE" },
        { "prompt", 'p', 0, G_OPTION_ARG_STRING, &a->prompt,
          "Ask this instead of the domain's final question", "TEXT" },
        CL_CLI_INT_ENTRY("max-tokens", 'n', "At most N tokens (default 256)", "N"),
        CL_CLI_INT_ENTRY("beam", 'b', "Beam search with N beams (1 = greedy)", "N"),
        { "delta", 0, 0, G_OPTION_ARG_NONE, &a->delta, "Heatmaps from the paper's Δ map", NULL },
        { NULL },
    };
    int rc = parse("describe", "ID - run the model on a case's images and record the result", NULL,
                   entries, ints, &argc, &argv);
    if (rc >= 0)
        return rc;
    if (argc != 2 || !parse_id(argv[1], &a->id))
        return usage("describe", "give one case id");
    if (a->model_path && a->random_init)
        return usage("describe", "--model and --random-init exclude each other");
    if (a->seed != -1 && !a->random_init)
        return usage("describe", "--seed only applies to --random-init");
    if (!a->device)
        a->device = g_strdup("auto");
    if (strcmp(a->device, "auto") != 0 && strcmp(a->device, "cpu") != 0 &&
        strcmp(a->device, "cuda") != 0)
        return usage("describe", "--device must be auto, cpu or cuda");
    return -1;
}

/* The run must describe exactly the images the case recorded: at least two, none moved or
 * changed. Returns -1 to go on, else the exit status. */
static int check_case_images(const ClCase *c, gint64 id)
{
    if (c->images->len < 2) {
        fprintf(stderr,
                "%s describe: case %" G_GINT64_FORMAT " has %u image%s; a description "
                "needs at least two (add them with 'case add')\n",
                PROG, id, c->images->len, c->images->len == 1 ? "" : "s");
        return 1;
    }
    for (guint i = 0; i < c->images->len; i++) {
        const ClCaseImage *img = g_ptr_array_index(c->images, i);
        if (img->file_state != CL_FILE_OK) {
            g_autofree char *path = cl_cli_printable(img->path);
            fprintf(stderr, "%s describe: image %u (%s) is %s%s; nothing was run\n", PROG, i + 1,
                    path, cl_file_state_name(img->file_state),
                    img->file_state == CL_FILE_MISSING
                        ? " (moved or deleted: put it back, or make a new case)"
                    : img->file_state == CL_FILE_CHANGED
                        ? " (its content differs from when it was added: add the new file to a "
                          "new case)"
                        : "");
            return 1;
        }
    }
    return -1;
}

/* The case's images into imgs: each file loaded once (kept in loaded, by path), frames taken
 * from it. Returns -1 to go on, else the exit status. */
static int load_case_images(const ClCase *c, GHashTable *loaded, ClDescribeImage *imgs)
{
    g_autoptr(GError) err = NULL;
    for (guint i = 0; i < c->images->len; i++) {
        const ClCaseImage *ci = g_ptr_array_index(c->images, i);
        ClImage *im = g_hash_table_lookup(loaded, ci->path);
        if (!im) {
            im = cl_image_load(ci->path, NULL, &err);
            if (!im)
                return fail("describe", err);
            g_hash_table_insert(loaded, g_strdup(ci->path), im);
        }
        if (ci->frame >= cl_image_n_frames(im)) {
            fprintf(stderr, "%s describe: %s has no frame %u any more\n", PROG, ci->path,
                    ci->frame + 1);
            return 1;
        }
        imgs[i].image = im;
        imgs[i].frame = ci->frame;
    }
    return -1;
}

/* The case with its files checked (*c), its images loaded once each (*loaded, by path) and taken
 * frame by frame (*imgs). Returns -1 to go on, else the exit status. */
static int open_case_images(ClCaseDb *db, gint64 id, ClCase **c, GHashTable **loaded,
                            ClDescribeImage **imgs)
{
    g_autoptr(GError) err = NULL;
    *c = cl_casedb_get_case(db, id, CL_CASE_CHECK_FILES, &err);
    if (!*c)
        return fail("describe", err);
    int rc = check_case_images(*c, id);
    if (rc >= 0)
        return rc;
    *loaded = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)cl_image_free);
    *imgs = g_new0(ClDescribeImage, (*c)->images->len);
    return load_case_images(*c, *loaded, *imgs);
}

/* The model, as the run records it: its name and the sha256 of its weights (a file's, or the
 * random init's). Returns -1 to go on, else the exit status. */
static int load_case_model(const CaseDescribeArgs *a, ClChatDomain domain, ClModel **model,
                           char **model_name, char **model_sha)
{
    g_autoptr(GError) err = NULL;
    if (a->random_init) {
        ClModelConfig cfg;
        if (!cl_model_config_preset(&cfg, a->random_init, &err))
            return usage("describe", err->message);
        *model = cl_model_new_random(&cfg, a->seed < 0 ? 0 : (guint64)a->seed, &err);
        if (*model) {
            *model_name = g_strdup_printf("random-init %s seed %" G_GINT64_FORMAT " (%s)",
                                          a->random_init, a->seed < 0 ? (gint64)0 : a->seed,
                                          cl_sve_variant_name(cfg.sve_variant));
            *model_sha = weights_sha256(*model);
        }
    } else {
        g_autofree char *resolved =
            a->model_path ? g_strdup(a->model_path) : cl_model_find_default_for(domain, &err);
        if (resolved)
            *model = cl_model_load(resolved, &err);
        if (*model) {
            *model_name = g_canonicalize_filename(resolved, NULL);
            *model_sha = g_strdup((*model)->sha256);
        }
    }
    return *model ? -1 : fail("describe", err);
}

/* Run, description version 1 and heatmaps, in one transaction. */
static int record_case_run(ClCaseDb *db, const CaseDescribeArgs *a, const ClCase *c,
                           const ClModel *model, const char *model_name, const char *model_sha,
                           const char *dev, const ClDescribeOptions *opts, ClDescribeResult *res,
                           double load_ms, gboolean quiet)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *cfg_json = cl_model_config_to_json(&model->config);
    g_autoptr(GPtrArray) heat = NULL;
    ClCaseRun *run = cl_case_run_from_describe(c->images, opts, res, model_name, model_sha,
                                               cfg_json, model->config.image_size, dev,
                                               a->seed < 0 ? 0 : (guint64)a->seed, load_ms, &heat);
    g_autofree char *text = g_utf8_make_valid(res->text ? res->text : "", -1);
    gint64 run_id = 0, vid = 0;
    gboolean ok = cl_casedb_run_record(db, a->id, run, text, heat, &run_id, &vid, &err);
    if (!quiet)
        fprintf(stderr, "%s describe: %s, %u images (%s), %u tokens in %.0f ms\n", PROG, dev,
                res->n_images, cl_chat_domain_name(res->domain), res->ids->len, run->total_ms);
    cl_case_run_free(run);
    if (!ok) {
        fprintf(stderr, "%s describe: %s\n%s describe: the run was NOT recorded\n", PROG,
                err->message, PROG);
        return 1;
    }
    if (!quiet)
        fprintf(stderr,
                "%s describe: recorded run %" G_GINT64_FORMAT
                " and description version id %" G_GINT64_FORMAT " (draft) in case %" G_GINT64_FORMAT
                "\n",
                PROG, run_id, vid, a->id);
    return 0;
}

static int cmd_describe(int argc, char **argv)
{
    g_auto(CaseDescribeArgs) a = { 0 };
    int rc = parse_describe_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) db = open_db(TRUE, &err);
    if (!db)
        return fail("describe", err);
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(ClCase) c = NULL;
    g_autoptr(GHashTable) loaded = NULL;
    g_autofree ClDescribeImage *imgs = NULL;
    if ((rc = open_case_images(db, a.id, &c, &loaded, &imgs)) >= 0)
        return rc;
    g_autoptr(ClModel) model = NULL;
    g_autofree char *model_name = NULL, *model_sha = NULL;
    /* the images' domain picks the default model, as describe's does (model.h) */
    const ClChatDomain domain = cl_describe_detect_domain(imgs[0].image);
    if ((rc = load_case_model(&a, domain, &model, &model_name, &model_sha)) >= 0)
        return rc;
    g_autofree char *notice = NULL;
    g_autoptr(ClBackend) be = cl_backend_new(a.device, &notice, &err);
    if (!be)
        return fail("describe", err);
    if (notice)
        fprintf(stderr, "%s describe: note: %s\n", PROG, notice);
    if (a.random_init)
        fprintf(stderr, "%s describe: note: %s: an untrained model, its text is noise\n", PROG,
                model_name);
    double load_ms = (g_get_monotonic_time() - t0) / 1000.0;

    ClDescribeOptions opts;
    cl_describe_options_init(&opts);
    opts.question = a.prompt;
    opts.max_new_tokens = (int)a.max_tokens;
    opts.beam_size = (int)a.beam_size;
    opts.delta = a.delta;
    opts.heatmaps = TRUE;
    gboolean streamed = FALSE;
    opts.on_token = cl_cli_stream_token;
    opts.user_data = &streamed;
    ClDescribeResult res;
    gboolean ok = cl_describe_run(be, model, imgs, c->images->len, &opts, &res, &err);
    if (streamed)
        fputc('\n', stdout);
    fflush(stdout);
    for (guint i = 0; i < res.notices->len; i++)
        fprintf(stderr, "%s describe: note: %s\n", PROG,
                (const char *)g_ptr_array_index(res.notices, i));
    if (!ok) {
        cl_describe_result_clear(&res);
        return fail("describe", err);
    }
    g_autofree char *dev = g_strdup(cl_backend_name(be));
    rc = record_case_run(db, &a, c, model, model_name, model_sha, dev, &opts, &res, load_ms, FALSE);
    cl_describe_result_clear(&res);
    return rc;
}

/* ---- batch describe (changelens-cli batch) ------------------------------------------------- */

/* Takes --db PATH / --db=PATH out of argv wherever it is (the rest, the command and its own
 * options, stays for the command to parse) into db_path_opt (*db owns it), and answers a missing
 * command or help with the usage. Returns -1 to go on, else the exit status. */
static int take_db_option(const char *prog, const char *usage_txt, char **db, int *argc,
                          char ***argv)
{
    GOptionEntry entries[] = {
        { "db", 0, 0, G_OPTION_ARG_FILENAME, db, NULL, NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(NULL);
    g_option_context_set_help_enabled(ctx, FALSE);
    g_option_context_set_ignore_unknown_options(ctx, TRUE);
    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!cl_cli_parse_options(ctx, prog, argc, argv))
        return CL_CLI_EXIT_USAGE;
    db_path_opt = *db;
    if (*argc < 2 || strcmp((*argv)[1], "--help") == 0 || strcmp((*argv)[1], "-h") == 0 ||
        strcmp((*argv)[1], "help") == 0) {
        fputs(usage_txt, *argc < 2 ? stderr : stdout);
        return *argc < 2 ? CL_CLI_EXIT_USAGE : 0;
    }
    return -1;
}

static const char batch_usage_text[] =
    "Usage: changelens-cli batch [--db PATH] COMMAND MANIFEST.jsonl [OPTIONS]\n"
    "\n"
    "Commands:\n"
    "  describe MANIFEST.jsonl   describe every case of the manifest that has no run yet:\n"
    "                            each line {\"key\": K, \"name\": N, \"images\": [FILE, FILE…]}\n"
    "                            (key: unique in the manifest, default line-N; name: the case's,\n"
    "                            default the key; relative files: from the manifest's folder).\n"
    "                            A line's case, images and record are written in one\n"
    "                            transaction; a re-run skips lines whose case has a run, so a\n"
    "                            killed or re-queued task redoes only what it had not recorded.\n"
    "    --shard K/N             only lines j with j mod N = K − 1 (K from 1 to N); under a\n"
    "                            Slurm job array, SLURM_ARRAY_TASK_ID/_MIN/_COUNT decide\n"
    "    --model FILE            the model (default: by the images' domain, as describe)\n"
    "    --device DEVICE         auto (default), cpu or cuda\n"
    "    --max-tokens N          at most N tokens a description (default 256)\n"
    "  status MANIFEST.jsonl [--json]\n"
    "                            lines described, made but not described, not started\n"
    "  --name NAME               the batch's name in the database (default: the manifest's\n"
    "                            file name without .jsonl)\n"
    "\n"
    "--db: as for 'case' (an SQLite file, or postgresql://… for the shards of a cluster to\n"
    "write into one server database). docs/DESIGN.md §6 has an sbatch --array example.\n";

typedef struct {
    char *key, *name;
    GPtrArray *paths; /* char* */
} ManifestLine;

static void manifest_line_free(ManifestLine *l)
{
    g_free(l->key);
    g_free(l->name);
    g_ptr_array_unref(l->paths);
    g_free(l);
}

#define MANIFEST_MAX_BYTES ((gsize)1 << 30)

/* The manifest's lines (blank lines skipped); an error names the line. */
static GPtrArray *read_manifest(const char *path, GError **error)
{
    g_autofree char *text = NULL;
    gsize len = 0;
    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s is not a regular file", path);
        return NULL;
    }
    if (!g_file_get_contents(path, &text, &len, error))
        return NULL;
    if (len > MANIFEST_MAX_BYTES || memchr(text, '\0', len)) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s is not a manifest (a text file of JSON lines under 1 GiB)", path);
        return NULL;
    }
    g_autofree char *dir = g_path_get_dirname(path);
    g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func((GDestroyNotify)manifest_line_free);
    g_autoptr(GHashTable) keys = g_hash_table_new(g_str_hash, g_str_equal);
    char **raw = g_strsplit(text, "\n", -1);
    for (int i = 0; raw[i]; i++) {
        g_strstrip(raw[i]);
        if (!raw[i][0])
            continue;
        g_autoptr(JsonParser) p = json_parser_new();
        GError *err = NULL;
        JsonNode *root = NULL;
        if (!g_utf8_validate(raw[i], -1, NULL))
            g_set_error_literal(&err, G_FILE_ERROR, G_FILE_ERROR_INVAL, "not UTF-8");
        else if (!cl_json_depth_ok(raw[i], -1, CL_JSON_MAX_DEPTH))
            g_set_error_literal(&err, G_FILE_ERROR, G_FILE_ERROR_INVAL, "nested too deeply");
        else if (json_parser_load_from_data(p, raw[i], -1, &err))
            root = json_parser_get_root(p);
        JsonObject *o = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
        JsonNode *im = o ? json_object_get_member(o, "images") : NULL;
        JsonArray *arr = im && JSON_NODE_HOLDS_ARRAY(im) ? json_node_get_array(im) : NULL;
        if (!err && !arr)
            g_set_error_literal(&err, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                                "not an object with an \"images\" list");
        if (!err && json_array_get_length(arr) < 2)
            g_set_error_literal(&err, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                                "a description needs at least two images");
        ManifestLine *l = g_new0(ManifestLine, 1);
        l->paths = g_ptr_array_new_with_free_func(g_free);
        for (guint k = 0; !err && k < json_array_get_length(arr); k++) {
            JsonNode *n = json_array_get_element(arr, k);
            const char *f = JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
                                ? json_node_get_string(n)
                                : NULL;
            if (!f || !*f)
                g_set_error(&err, G_FILE_ERROR, G_FILE_ERROR_INVAL, "image %u is not a file name",
                            k + 1);
            else
                g_ptr_array_add(l->paths, g_path_is_absolute(f) ? g_strdup(f)
                                                                : g_build_filename(dir, f, NULL));
        }
        for (int m = 0; !err && m < 2; m++) {
            const char *field = m ? "name" : "key";
            JsonNode *n = json_object_get_member(o, field);
            if (!n)
                continue;
            const char *v = JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
                                ? json_node_get_string(n)
                                : NULL;
            if (!v || !*v)
                g_set_error(&err, G_FILE_ERROR, G_FILE_ERROR_INVAL, "\"%s\" is not a text", field);
            else if (m)
                l->name = g_strdup(v);
            else
                l->key = g_strdup(v);
        }
        if (!err && !l->key)
            l->key = g_strdup_printf("line-%d", i + 1);
        if (!err && !l->name)
            l->name = g_strdup(l->key);
        if (!err && g_hash_table_contains(keys, l->key))
            g_set_error(&err, G_FILE_ERROR, G_FILE_ERROR_INVAL, "key \"%s\" is used twice", l->key);
        if (err) {
            g_set_error(error, err->domain, err->code, "%s line %d: %s", path, i + 1, err->message);
            g_error_free(err);
            manifest_line_free(l);
            g_strfreev(raw);
            return NULL;
        }
        g_hash_table_add(keys, l->key);
        g_ptr_array_add(lines, l);
    }
    g_strfreev(raw);
    return g_steal_pointer(&lines);
}

/* The batch's name: --name, else the manifest's file name without .jsonl. */
static char *batch_name(const char *manifest, const char *name_opt)
{
    if (name_opt)
        return g_strdup(name_opt);
    char *base = g_path_get_basename(manifest);
    if (g_str_has_suffix(base, ".jsonl"))
        base[strlen(base) - 6] = '\0';
    return base;
}

/* The manifest's lines, the batch's name and the database (write: created if new). Returns -1 to
 * go on, else the exit status. */
static int open_batch(const char *cmd, const char *manifest, const char *name_opt, gboolean write,
                      GPtrArray **lines, char **bname, ClCaseDb **db)
{
    g_autoptr(GError) err = NULL;
    if (!(*lines = read_manifest(manifest, &err)))
        return fail(cmd, err);
    *bname = batch_name(manifest, name_opt);
    if (!(*db = open_db(write, &err)))
        return fail(cmd, err);
    return -1;
}

/* --shard K/N, or Slurm's job array, or 1/1. FALSE: a malformed value (message printed). */
static gboolean batch_shard(const char *opt, int *k, int *n)
{
    *k = 1, *n = 1;
    if (opt) {
        gint64 kk = 0, nn = 0;
        g_auto(GStrv) parts = g_strsplit(opt, "/", 2);
        if (!parts[0] || !parts[1] || !cl_cli_parse_int(NULL, parts[0], 1, 1 << 20, &kk, NULL) ||
            !cl_cli_parse_int(NULL, parts[1], 1, 1 << 20, &nn, NULL) || kk > nn) {
            usage("describe", "--shard is K/N with 1 <= K <= N (say 3/8)");
            return FALSE;
        }
        *k = (int)kk, *n = (int)nn;
        return TRUE;
    }
    const char *id = g_getenv("SLURM_ARRAY_TASK_ID"), *count = g_getenv("SLURM_ARRAY_TASK_COUNT");
    const char *min = g_getenv("SLURM_ARRAY_TASK_MIN");
    gint64 i = 0, c = 0, lo = 0;
    if (id && count && cl_cli_parse_int(NULL, id, 0, 1 << 20, &i, NULL) &&
        cl_cli_parse_int(NULL, count, 1, 1 << 20, &c, NULL) &&
        (!min || cl_cli_parse_int(NULL, min, 0, 1 << 20, &lo, NULL)) && i - lo >= 0 && i - lo < c) {
        *k = (int)(i - lo) + 1, *n = (int)c;
    }
    return TRUE;
}

/* A model per domain, loaded once for the whole shard. */
typedef struct {
    ClModel *model[CL_CHAT_N_DOMAINS];
    char *name[CL_CHAT_N_DOMAINS], *sha[CL_CHAT_N_DOMAINS];
} ModelCache;

static void model_cache_clear(ModelCache *mc)
{
    for (int d = 0; d < CL_CHAT_N_DOMAINS; d++) {
        g_clear_pointer(&mc->model[d], cl_model_free);
        g_clear_pointer(&mc->name[d], g_free);
        g_clear_pointer(&mc->sha[d], g_free);
    }
}

/* Describes the case (its images checked and loaded) and records the run. 0: done. */
static int batch_describe_case(ClCaseDb *db, const CaseDescribeArgs *a, ClBackend *be,
                               ModelCache *mc, gint64 case_id)
{
    g_autoptr(GError) err = NULL;
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(ClCase) c = NULL;
    g_autoptr(GHashTable) loaded = NULL;
    g_autofree ClDescribeImage *imgs = NULL;
    int rc = open_case_images(db, case_id, &c, &loaded, &imgs);
    if (rc >= 0)
        return rc;
    const ClChatDomain d = cl_describe_detect_domain(imgs[0].image);
    if (!mc->model[d] &&
        (rc = load_case_model(a, d, &mc->model[d], &mc->name[d], &mc->sha[d])) >= 0)
        return rc;
    ClDescribeOptions opts;
    cl_describe_options_init(&opts);
    opts.max_new_tokens = (int)a->max_tokens;
    opts.heatmaps = TRUE;
    ClDescribeResult res;
    if (!cl_describe_run(be, mc->model[d], imgs, c->images->len, &opts, &res, &err))
        return fail("describe", err);
    CaseDescribeArgs one = *a;
    one.id = case_id;
    rc = record_case_run(db, &one, c, mc->model[d], mc->name[d], mc->sha[d], cl_backend_name(be),
                         &opts, &res, (g_get_monotonic_time() - t0) / 1000.0, TRUE);
    cl_describe_result_clear(&res);
    return rc;
}

static int batch_describe(int argc, char **argv)
{
    g_auto(CaseDescribeArgs) a = { 0 };
    g_autofree char *shard = NULL, *name_opt = NULL;
    a.max_tokens = 256, a.seed = -1, a.beam_size = 1;
    const ClCliIntOption ints[] = { { "max-tokens", 'n', 1, G_MAXINT, &a.max_tokens }, { NULL } };
    GOptionEntry entries[] = {
        { "model", 'm', 0, G_OPTION_ARG_FILENAME, &a.model_path, "Model file", "FILE" },
        { "device", 'd', 0, G_OPTION_ARG_STRING, &a.device, "auto (default), cpu or cuda",
          "DEVICE" },
        { "shard", 0, 0, G_OPTION_ARG_STRING, &shard, "Only shard K of N (1 <= K <= N)", "K/N" },
        { "name", 0, 0, G_OPTION_ARG_STRING, &name_opt, "The batch's name", "NAME" },
        CL_CLI_INT_ENTRY("max-tokens", 'n', "At most N tokens (default 256)", "N"),
        { NULL },
    };
    int rc =
        parse("describe", "MANIFEST.jsonl", "describe every case of a manifest not yet described",
              entries, ints, &argc, &argv);
    if (rc >= 0)
        return rc;
    if (argc != 2)
        return usage("describe", "give one manifest file");
    int k, n;
    if (!batch_shard(shard, &k, &n))
        return CL_CLI_EXIT_USAGE;
    if (!a.device)
        a.device = g_strdup("auto");
    g_autoptr(GPtrArray) lines = NULL;
    g_autofree char *bname = NULL;
    g_autoptr(ClCaseDb) db = NULL;
    if ((rc = open_batch("describe", argv[1], name_opt, TRUE, &lines, &bname, &db)) >= 0)
        return rc;
    g_autoptr(GError) err = NULL;
    g_autofree char *notice = NULL;
    g_autoptr(ClBackend) be = cl_backend_new(a.device, &notice, &err);
    if (!be)
        return fail("describe", err);
    ModelCache mc = { 0 };
    guint mine = 0, now_done = 0, before = 0, failed = 0;
    gint64 t0 = g_get_monotonic_time();
    for (guint j = 0; j < lines->len; j++)
        mine += (int)(j % (guint)n) == k - 1;
    for (guint j = 0, seen = 0; j < lines->len; j++) {
        if ((int)(j % (guint)n) != k - 1)
            continue;
        seen++;
        const ManifestLine *l = g_ptr_array_index(lines, j);
        g_autoptr(GPtrArray) images =
            g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_image_free);
        gboolean ok = TRUE;
        for (guint i = 0; ok && i < l->paths->len; i++) {
            ClCaseImage *img = g_new0(ClCaseImage, 1);
            g_clear_error(&err);
            ok = cl_case_image_from_file(g_ptr_array_index(l->paths, i), 0, img, &err);
            g_ptr_array_add(images, img);
        }
        gint64 case_id = 0;
        ClBatchState state = CL_BATCH_NEW;
        if (ok)
            ok = cl_casedb_batch_case(db, bname, l->key, l->name, images, &case_id, &state, &err);
        if (!ok) {
            g_autofree char *key = cl_cli_printable(l->key);
            fprintf(stderr, "%s describe: %s: %s\n", "changelens-cli batch", key, err->message);
            failed++;
            continue;
        }
        if (state == CL_BATCH_DONE) {
            before++;
            continue;
        }
        if (batch_describe_case(db, &a, be, &mc, case_id) == 0)
            now_done++;
        else
            failed++;
        fprintf(stderr,
                "changelens-cli batch: shard %d/%d: %u of %u lines (%u described now, %u "
                "before, %u failed), %.2f s a description\n",
                k, n, seen, mine, now_done, before, failed,
                (g_get_monotonic_time() - t0) / 1e6 / MAX(now_done, 1));
    }
    model_cache_clear(&mc);
    g_autofree char *shown = cl_cli_printable(bname);
    printf("batch %s shard %d/%d: %u lines, %u described now, %u described before, %u failed\n",
           shown, k, n, mine, now_done, before, failed);
    return failed ? 1 : 0;
}

static int batch_status(int argc, char **argv)
{
    g_autofree char *name_opt = NULL;
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        { "name", 0, 0, G_OPTION_ARG_STRING, &name_opt, "The batch's name", "NAME" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &json, "One JSON object", NULL },
        { NULL },
    };
    int rc = parse("status", "MANIFEST.jsonl", "how far a batch is", entries, NULL, &argc, &argv);
    if (rc >= 0)
        return rc;
    if (argc != 2)
        return usage("status", "give one manifest file");
    g_autoptr(GPtrArray) lines = NULL;
    g_autofree char *bname = NULL;
    g_autoptr(ClCaseDb) db = NULL;
    if ((rc = open_batch("status", argv[1], name_opt, FALSE, &lines, &bname, &db)) >= 0)
        return rc;
    g_autoptr(GError) err = NULL;
    gint64 made = 0, described = 0;
    if (!cl_casedb_batch_counts(db, bname, &made, &described, &err))
        return fail("status", err);
    gint64 total = lines->len, pending = made - described, todo = total - made;
    if (json) { /* the name is the user's text: json-glib escapes it */
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_object(b);
        cl_json_str(b, "batch", bname);
        cl_json_int(b, "lines", total);
        cl_json_int(b, "described", described);
        cl_json_int(b, "made_not_described", pending);
        cl_json_int(b, "not_started", todo);
        json_builder_end_object(b);
        cl_cli_print_json(b);
    } else {
        g_autofree char *name = cl_cli_printable(bname);
        printf("batch %s: %" G_GINT64_FORMAT " lines: %" G_GINT64_FORMAT
               " described, %" G_GINT64_FORMAT " made but not described, %" G_GINT64_FORMAT
               " not started\n",
               name, total, described, pending, todo);
    }
    return 0;
}

int cl_cli_batch(int argc, char **argv)
{
    g_autofree char *db = NULL;
    int rc = take_db_option("changelens-cli batch", batch_usage_text, &db, &argc, &argv);
    if (rc >= 0)
        return rc;
    if (strcmp(argv[1], "describe") == 0)
        return batch_describe(argc - 1, argv + 1);
    if (strcmp(argv[1], "status") == 0)
        return batch_status(argc - 1, argv + 1);
    return cl_cli_usage_error("changelens-cli batch", "unknown command '%s' (describe, status)",
                              argv[1]);
}

/* ---- dispatch --------------------------------------------------------------------------------- */

int cl_cli_case(int argc, char **argv)
{
    g_autofree char *db = NULL;
    int rc = take_db_option(PROG, usage_text, &db, &argc, &argv);
    if (rc >= 0)
        return rc;
    const char *cmd = argv[1];
    int sargc = argc - 1;
    char **sargv = argv + 1;
    if (strcmp(cmd, "new") == 0)
        return cmd_new(sargc, sargv);
    if (strcmp(cmd, "add") == 0)
        return cmd_add(sargc, sargv);
    if (strcmp(cmd, "list") == 0)
        return cmd_list(sargc, sargv);
    if (strcmp(cmd, "show") == 0)
        return cmd_show(sargc, sargv);
    if (strcmp(cmd, "search") == 0)
        return cmd_search(sargc, sargv);
    if (strcmp(cmd, "describe") == 0)
        return cmd_describe(sargc, sargv);
    if (strcmp(cmd, "edit") == 0)
        return cmd_edit(sargc, sargv);
    if (strcmp(cmd, "accept") == 0)
        return cmd_status("accept", CL_DESC_ACCEPTED, sargc, sargv);
    if (strcmp(cmd, "reject") == 0)
        return cmd_status("reject", CL_DESC_REJECTED, sargc, sargv);
    if (strcmp(cmd, "note") == 0)
        return cmd_note(sargc, sargv);
    if (strcmp(cmd, "key") == 0)
        return cmd_key(sargc, sargv);
    if (strcmp(cmd, "export") == 0)
        return cmd_export(sargc, sargv);
    if (strcmp(cmd, "delete") == 0)
        return cmd_delete(sargc, sargv);
    fprintf(stderr, "%s: unknown command '%s'\n\n%s", PROG, cmd, usage_text);
    return CL_CLI_EXIT_USAGE;
}
