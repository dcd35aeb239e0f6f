/* test-taskmetrics.c - the task scores of taskmetrics.h against hand-worked examples: the
 * paper's own radiology answer (appendix B.4) and its parsing table (appendix F), F1 counts done
 * by hand, permutation invariance of the change matching, numeric parsing. */
#include <math.h>
#include <string.h>

#include "train/taskmetrics.h"

static int finding_index(const char *name)
{
    const char *const *f = cl_findings();
    for (int i = 0; f[i]; i++)
        if (strcmp(f[i], name) == 0)
            return i;
    g_error("no finding '%s'", name);
    return -1;
}

static void test_findings_list(void)
{
    const char *const *f = cl_findings();
    int n = 0;
    while (f[n])
        n++;
    g_assert_cmpint(n, ==, CL_N_FINDINGS);
    g_assert_cmpstr(f[0], ==, "atelectasis");
    g_assert_cmpstr(f[CL_N_FINDINGS - 1], ==, "gastric distention");
}

static void test_findings_parse(void)
{
    /* the paper's example answer (appendix B.4) */
    ClFindingLabels l;
    cl_findings_parse("the main image has an additional finding of pneumothorax than the reference "
                      "image. the main image is missing the findings of fracture, lung opacity, "
                      "and pleural effusion than the reference image.",
                      &l);
    g_assert_true(l.added[finding_index("pneumothorax")]);
    g_assert_true(l.missing[finding_index("fracture")]);
    g_assert_true(l.missing[finding_index("lung opacity")]);
    g_assert_true(l.missing[finding_index("pleural effusion")]);
    int n = 0;
    for (int i = 0; i < CL_N_FINDINGS; i++)
        n += l.added[i] + l.missing[i];
    g_assert_cmpint(n, ==, 4);

    /* longest name first: the aorta's two tortuosities, blunting (which contains "angle"), and no
     * "edema" inside "oedema" */
    cl_findings_parse("The main image has additional findings of tortuosity of the descending "
                      "aorta and blunting of the costophrenic angle, oedema.",
                      &l);
    g_assert_true(l.added[finding_index("tortuosity of the descending aorta")]);
    g_assert_false(l.added[finding_index("tortuosity of the thoracic aorta")]);
    g_assert_true(l.added[finding_index("blunting of the costophrenic angle")]);
    g_assert_false(l.added[finding_index("edema")]);

    /* no change, free text and NULL: no labels */
    cl_findings_parse("nothing has changed.", &l);
    g_assert_true(cl_findings_empty(&l));
    cl_findings_parse("The heart looks bigger (cardiomegaly).", &l);
    g_assert_true(cl_findings_empty(&l));
    cl_findings_parse(NULL, &l);
    g_assert_true(cl_findings_empty(&l));

    /* equal: the same findings in either order and wording; not when one moves direction */
    ClFindingLabels a, b;
    cl_findings_parse("the main image has additional findings of hernia and edema than the "
                      "reference image.",
                      &a);
    cl_findings_parse("the main image has an additional finding of edema than the reference "
                      "image. the main image has an additional finding of hernia than the "
                      "reference image.",
                      &b);
    g_assert_true(cl_findings_equal(&a, &b));
    cl_findings_parse("the main image has an additional finding of edema than the reference "
                      "image. the main image is missing the finding of hernia than the "
                      "reference image.",
                      &b);
    g_assert_false(cl_findings_equal(&a, &b));
}

static void test_finding_score(void)
{
    ClFindingScore s;
    cl_finding_score_init(&s);
    const char *add_pe = "the main image has an additional finding of pleural effusion than the "
                         "reference image.";
    const char *add_pe_cm = "the main image has additional findings of pleural effusion and "
                            "cardiomegaly than the reference image.";
    const char *miss_pe = "the main image is missing the finding of pleural effusion than the "
                          "reference image.";
    const char *none = "nothing has changed.";
    cl_finding_score_add(&s, add_pe, add_pe);     /* TP pe+ */
    cl_finding_score_add(&s, add_pe, add_pe_cm);  /* TP pe+, FP cm+ */
    cl_finding_score_add(&s, add_pe_cm, miss_pe); /* FN pe+, FN cm+, FP pe- */
    cl_finding_score_add(&s, none, none);         /* change acc only: right */
    cl_finding_score_add(&s, none, add_pe);       /* change acc only: wrong */
    ClFindingResult r;
    cl_finding_score_result(&s, &r);
    g_assert_cmpuint(r.n_pairs, ==, 5);
    g_assert_cmpuint(r.n_changed_pairs, ==, 3);
    /* TP 2, FP 2, FN 2 → micro 4 / (4 + 4) */
    g_assert_cmpfloat(fabs(r.micro_f1 - 0.5), <, 1e-12);
    /* labels present: pe+ (TP2 FN1: 4/5), cm+ (FP1 FN1: 0), pe- (FP1: 0) → macro 0.8 / 3 */
    g_assert_cmpfloat(fabs(r.macro_f1 - 0.8 / 3), <, 1e-12);
    g_assert_cmpfloat(fabs(r.macro_f1_all54 - 0.8 / 54), <, 1e-12);
    /* change accuracy: pairs 1, 2, 3 (changed ⇔ changed) and 4 right, 5 wrong */
    g_assert_cmpfloat(fabs(r.change_accuracy - 4.0 / 5), <, 1e-12);
}

static void test_sentences(void)
{
    g_autoptr(GPtrArray) s = cl_change_sentences("The red cube moved.  A new sphere is visible!"
                                                 " Is it 0.5 units? no");
    g_assert_cmpuint(s->len, ==, 4);
    g_assert_cmpstr(g_ptr_array_index(s, 0), ==, "The red cube moved.");
    g_assert_cmpstr(g_ptr_array_index(s, 2), ==, "Is it 0.5 units?"); /* 0.5 is not a stop */
    g_autofree char *n = cl_change_normalise("  A new, LARGE cube — is visible!! ");
    g_assert_cmpstr(n, ==, "a new large cube \xe2\x80\x94 is visible");
}

static void test_change_match(void)
{
    const char *a[] = { "The small red metal cube has been moved.",
                        "The small red metal cube changed its location.", NULL };
    const char *b[] = { "A new large yellow metal cylinder is visible.",
                        "Someone added a large yellow metal cylinder.", NULL };
    const char *c[] = { "The small gray rubber sphere has disappeared.", NULL };
    ClRefChange refs[] = { { a }, { b }, { c } };

    /* the same changes in another order, with other accepted wordings: all exact */
    ClChangeMatch m;
    cl_change_match("Someone added a large yellow metal cylinder. The small gray rubber sphere has "
                    "disappeared. The small red metal cube changed its location.",
                    refs, 3, &m);
    g_assert_cmpuint(m.n_exact, ==, 3);
    g_assert_cmpint(m.assignment[0], ==, 2);
    g_assert_cmpint(m.assignment[1], ==, 0);
    g_assert_cmpint(m.assignment[2], ==, 1);
    g_assert_cmpfloat(cl_change_match_accuracy(&m), ==, 1.0);
    cl_change_match_clear(&m);

    /* one wrong attribute, one missing change, one invented change */
    cl_change_match("The small blue metal cube has been moved. A new large yellow metal cylinder "
                    "is visible. The big green ball has disappeared.",
                    refs, 3, &m);
    g_assert_cmpuint(m.n_exact, ==, 1);
    g_assert_cmpint(m.assignment[1], ==, 1);
    g_assert_cmpint(m.assignment[0], ==, 0); /* the near miss is still the best partner */
    g_assert_cmpfloat(m.similarity, >, 1.5);
    g_assert_cmpfloat(fabs(cl_change_match_accuracy(&m) - 1.0 / 3), <, 1e-12);
    cl_change_match_clear(&m);

    /* extra sentences cost: 1 exact out of max(1, 3) */
    cl_change_match("The small gray rubber sphere has disappeared. Nothing else. Really.", refs + 2,
                    1, &m);
    g_assert_cmpuint(m.n_exact, ==, 1);
    g_assert_cmpfloat(fabs(cl_change_match_accuracy(&m) - 1.0 / 3), <, 1e-12);
    cl_change_match_clear(&m);

    /* empty prediction, no references */
    cl_change_match("", refs, 3, &m);
    g_assert_cmpuint(m.n_exact, ==, 0);
    g_assert_cmpint(m.assignment[0], ==, -1);
    g_assert_cmpfloat(cl_change_match_accuracy(&m), ==, 0.0);
    cl_change_match_clear(&m);
    cl_change_match("", NULL, 0, &m);
    g_assert_cmpfloat(cl_change_match_accuracy(&m), ==, 1.0);
    cl_change_match_clear(&m);

    /* many sentences: the greedy path still finds exact matches */
    GString *many = g_string_new(NULL);
    for (int i = 0; i < 20; i++)
        g_string_append_printf(many, "Filler sentence number %d. ", i);
    g_string_append(many, "The small gray rubber sphere has disappeared.");
    cl_change_match(many->str, refs, 3, &m);
    g_assert_cmpint(m.assignment[2], ==, 20);
    g_assert_cmpuint(m.n_exact, ==, 1);
    cl_change_match_clear(&m);
    g_string_free(many, TRUE);
}

static void test_numbers(void)
{
    double v;
    g_assert_true(cl_parse_first_number("The distance is 0.1234.", &v));
    g_assert_cmpfloat(v, ==, 0.1234);
    g_assert_true(cl_parse_first_number("about -.5 units", &v));
    g_assert_cmpfloat(v, ==, -0.5);
    g_assert_true(cl_parse_first_number("area: 12", &v));
    g_assert_cmpfloat(v, ==, 12);
    g_assert_false(cl_parse_first_number("no idea - really.", &v));
    g_assert_false(cl_parse_first_number(NULL, &v));

    ClNumericScore s = { 0 };
    cl_numeric_score_add(&s, 0.5, "0.4000");
    cl_numeric_score_add(&s, 0.2, "0.5000");
    cl_numeric_score_add(&s, 0.1, "I cannot tell");
    g_assert_cmpuint(s.n, ==, 3);
    g_assert_cmpuint(s.n_unparsed, ==, 1);
    g_assert_cmpfloat(fabs(cl_numeric_score_mae(&s) - (0.1 + 0.3 + 0.1) / 3), <, 1e-12);
    g_assert_cmpfloat(fabs(cl_numeric_score_rmse(&s) - sqrt((0.01 + 0.09 + 0.01) / 3)), <, 1e-12);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/taskmetrics/findings-list", test_findings_list);
    g_test_add_func("/taskmetrics/findings-parse", test_findings_parse);
    g_test_add_func("/taskmetrics/finding-score", test_finding_score);
    g_test_add_func("/taskmetrics/sentences", test_sentences);
    g_test_add_func("/taskmetrics/change-match", test_change_match);
    g_test_add_func("/taskmetrics/numbers", test_numbers);
    return g_test_run();
}
