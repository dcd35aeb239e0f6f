/* test-png.c - the PNG loader: every fixture value by value and under corruption, a second opinion
 * from gdk-pixbuf's own PNG decoder, limits before allocation, bad CRCs, text metadata. */
#include <gdk-pixbuf/gdk-pixbuf.h>
#include <string.h>

#include "fixtures.h"
#include "image/loaders.h"

static GPtrArray *fixtures; /* ClFixture*, written once into fixture_dir */
static char *fixture_dir;

static const ClFixture *find_fixture(const char *file)
{
    const ClFixture *f = cl_fixture_find(fixtures, file);
    if (!f)
        g_error("no fixture %s", file);
    return f;
}

static GBytes *read_fixture(const char *file)
{
    char *data = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(find_fixture(file)->path, &data, &len, NULL));
    return g_bytes_new_take(data, len);
}

static void test_fixture(gconstpointer p)
{
    const ClFixture *f = p;
    g_autoptr(GError) err = NULL;
    if (!cl_fixture_load_and_check(f, &err))
        g_error("%s", err->message);
    guint n = cl_fixture_corruption_sweep(f);
    g_test_message("%s: %u corrupted versions handled", f->what, n);
}

/* gdk-pixbuf decodes PNG with libpng's own transforms (expand, strip to 8 bits, grey to RGB):
 * a different path from ours, so bit-order, byte-order and palette mistakes that a writer and a
 * reader could share do not pass both. */
static void test_cross_check_gdk_pixbuf(void)
{
    guint checked = 0;
    for (guint i = 0; i < fixtures->len; i++) {
        const ClFixture *f = g_ptr_array_index(fixtures, i);
        if (f->must_fail)
            continue;
        g_autoptr(GError) err = NULL;
        g_autoptr(ClImage) img = cl_image_load(f->path, NULL, &err);
        g_assert_no_error(err);
        g_autoptr(GdkPixbuf) pb = gdk_pixbuf_new_from_file(f->path, &err);
        g_assert_no_error(err);
        g_assert_cmpint(gdk_pixbuf_get_width(pb), ==, img->width);
        g_assert_cmpint(gdk_pixbuf_get_height(pb), ==, img->height);
        gboolean alpha = img->channels == 2 || img->channels == 4;
        g_assert_cmpint(gdk_pixbuf_get_has_alpha(pb), ==, alpha);
        int nch = gdk_pixbuf_get_n_channels(pb), stride = gdk_pixbuf_get_rowstride(pb);
        const guint8 *px = gdk_pixbuf_read_pixels(pb);
        double maxval = (double)((1u << img->bits) - 1);
        for (guint y = 0; y < img->height; y++)
            for (guint x = 0; x < img->width; x++) {
                gsize o = (gsize)y * img->width + x;
                const guint8 *q = px + (gsize)y * stride + (gsize)x * nch;
                for (int c = 0; c < nch; c++) {
                    /* our channel for pixbuf channel c: grey feeds R, G and B */
                    guint ours = img->channels <= 2 ? (c < 3 ? 0 : 1) : (guint)c;
                    double v = cl_image_plane(img, 0, ours)[o];
                    double want = img->bits == 16 ? v / 256.0 : v * 255.0 / maxval;
                    /* 16 -> 8 bits: libpng strips or rounds depending on the build; allow 1 */
                    double tol = img->bits == 16 ? 1.0 : 0.0;
                    if (q[c] < want - tol - 1e-9 || q[c] > want + tol + 1e-9)
                        g_error("%s: pixel (%u,%u) channel %d is %u in gdk-pixbuf, ours %g "
                                "(%u bits)",
                                f->what, x, y, c, q[c], v, img->bits);
                }
            }
        checked++;
    }
    g_assert_cmpuint(checked, >=, 25);
}

static void test_huge_header(void)
{
    const ClFixture *f = find_fixture("png-huge-header.png");
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load(f->path, NULL, &err);
    g_assert_null(img);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    /* refused by the budget check, not by a failed allocation or the missing pixel data */
    g_assert_nonnull(strstr(err->message, "pixel budget"));
    g_assert_nonnull(strstr(err->message, "png-huge-header.png"));
    g_assert_nonnull(strstr(err->message, "100000"));
    g_clear_error(&err);

    /* the same with a caller's own, much smaller budget */
    ClImageLimits small = { .max_pixels = 1 << 20, .max_frames = 1, .max_channels = 4 };
    g_assert_null(cl_image_load(f->path, &small, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_assert_nonnull(strstr(err->message, "pixel budget"));
    g_clear_error(&err);

    /* an ordinary 37×23 file over a tiny budget, and RGBA over a three-channel limit */
    ClImageLimits tiny = { .max_pixels = 500, .max_frames = 1, .max_channels = 4 };
    g_assert_null(cl_image_load(find_fixture("png-rgb8.png")->path, &tiny, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_assert_nonnull(strstr(err->message, "png-rgb8.png"));
    g_clear_error(&err);
    ClImageLimits three = { .max_pixels = 1 << 20, .max_frames = 1, .max_channels = 3 };
    g_assert_null(cl_image_load(find_fixture("png-rgba8.png")->path, &three, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_assert_nonnull(strstr(err->message, "channels"));
    g_clear_error(&err);
    /* exactly at the budget still loads */
    ClImageLimits exact = { .max_pixels = 37 * 23, .max_frames = 1, .max_channels = 3 };
    g_autoptr(ClImage) ok = cl_image_load(find_fixture("png-rgb8.png")->path, &exact, &err);
    g_assert_no_error(err);
    g_assert_nonnull(ok);
}

/* Headers that fit the budget over files that hold almost no pixel data must fail cleanly, and
 * without first allocating gigabytes for the pixels the header promises. */
static void test_header_without_data(void)
{
    g_autoptr(GBytes) b = read_fixture("png-grey8.png");
    gsize len = 0;
    const guint8 *d = g_bytes_get_data(b, &len);
    g_autoptr(GError) err = NULL;
    /* signature + IHDR only */
    g_assert_null(cl_image_load_data(d, 33, "head.png", NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    g_assert_nonnull(strstr(err->message, "head.png"));
    g_assert_nonnull(strstr(err->message, "truncated"));
    g_clear_error(&err);
    /* cut inside the pixel data; no name -> "image" */
    g_assert_null(cl_image_load_data(d, len / 2, NULL, NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    g_assert_true(g_str_has_prefix(err->message, "image: "));
    g_clear_error(&err);

    /* 16000 × 16000 16-bit RGBA (under the 2^28 pixel budget: 4 GiB as float) over the 37×23
     * file's own IDAT: refused from the IDAT size, in well under a second. */
    g_autofree guint8 *big = g_memdup2(d, len);
    cl_fixture_put_be32(big + 16, 16000);
    cl_fixture_put_be32(big + 20, 16000);
    big[24] = 16;
    big[25] = 6;
    cl_fixture_put_be32(big + 29, cl_fixture_crc32(big + 12, 17));
    gint64 t0 = g_get_monotonic_time();
    g_assert_null(cl_image_load_data(big, len, "claims-16000.png", NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    g_assert_nonnull(strstr(err->message, "cannot hold 16000 × 16000"));
    g_assert_cmpint(g_get_monotonic_time() - t0, <, G_USEC_PER_SEC);
}

static void test_not_png(void)
{
    g_autoptr(GError) err = NULL;
    static const char text[] = "this is a text file, not a picture\n";
    g_assert_null(
        cl_image_load_data((const guint8 *)text, sizeof text - 1, "notes.txt", NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNKNOWN_FORMAT);
    g_assert_nonnull(strstr(err->message, "notes.txt"));
    g_clear_error(&err);

    g_assert_null(cl_image_load_data((const guint8 *)"", 0, "empty.png", NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    g_clear_error(&err);

    /* the PNG loader called directly on something else: libpng's signature check */
    g_assert_null(cl_image_load_png((const guint8 *)text, sizeof text - 1, "x.png", NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    g_assert_nonnull(strstr(err->message, "x.png"));
    g_clear_error(&err);

    /* signature alone */
    g_assert_null(
        cl_image_load_data((const guint8 *)"\x89PNG\r\n\x1a\n", 8, "sig.png", NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
}

/* Returns the offset of the first chunk of this type (its length field). */
static gsize chunk_offset(const guint8 *d, gsize len, const char *type)
{
    for (gsize pos = 8; pos + 8 <= len;) {
        guint32 n = ((guint32)d[pos] << 24) | ((guint32)d[pos + 1] << 16) |
                    ((guint32)d[pos + 2] << 8) | d[pos + 3];
        if (memcmp(d + pos + 4, type, 4) == 0)
            return pos;
        pos += 12 + (gsize)n;
    }
    g_error("no %s chunk", type);
    return 0;
}

static void test_bad_crc(void)
{
    g_autoptr(GBytes) b = read_fixture("png-rgb8.png");
    gsize len = 0;
    const guint8 *d = g_bytes_get_data(b, &len);
    const char *types[] = { "IHDR", "IDAT", "tEXt", "zTXt", "iTXt", "IEND" };
    for (guint k = 0; k < G_N_ELEMENTS(types); k++) {
        g_autofree guint8 *copy = g_memdup2(d, len);
        gsize pos = chunk_offset(copy, len, types[k]);
        guint32 n = ((guint32)copy[pos] << 24) | ((guint32)copy[pos + 1] << 16) |
                    ((guint32)copy[pos + 2] << 8) | copy[pos + 3];
        copy[pos + 8 + n + 3] ^= 0x01; /* last CRC byte */
        g_autoptr(GError) err = NULL;
        g_autoptr(ClImage) img = cl_image_load_data(copy, len, "crc.png", NULL, &err);
        if (img)
            g_error("%s with a bad CRC loaded", types[k]);
        g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
        if (!strstr(err->message, "CRC"))
            g_error("%s: message '%s' does not mention the CRC", types[k], err->message);
    }
    /* and the written bad-CRC fixture through the common path */
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_fixture_load_and_check(find_fixture("png-bad-crc.png"), &err));
    g_assert_no_error(err);
}

static void test_metadata(void)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load(find_fixture("png-rgb8.png")->path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(cl_image_get_meta(img, "Title"), ==, "ChangeLens PNG fixture");
    g_assert_cmpstr(cl_image_get_meta(img, "Author"), ==, "Jos\xc3\xa9 N\xc3\xba\xc3\xb1\x65z");
    const char *comment = cl_image_get_meta(img, "Comment");
    g_assert_nonnull(comment);
    g_assert_true(g_str_has_prefix(comment, "A zTXt comment long enough"));
    g_assert_true(g_str_has_suffix(comment, "compressed comment text."));
    g_assert_cmpstr(cl_image_get_meta(img, "Description"), ==,
                    "Gr\xc3\xb6\xc3\x9f\x65 \xe2\x9c\x93 (UTF-8)");
    g_assert_cmpstr(cl_image_get_meta(img, "Software"), ==, "fixtures-png (after IDAT)");
    g_assert_cmpstr(cl_image_get_meta(img, "Gamma"), ==, "0.45455");
    g_assert_cmpstr(cl_image_get_meta(img, "sRGB"), ==, "perceptual");
    g_assert_null(cl_image_get_meta(img, "ICCProfile"));
    g_assert_cmpstr(cl_image_get_meta(img, "PixelsPerMeterX"), ==, "3780");
    g_assert_cmpstr(cl_image_get_meta(img, "PixelsPerMeterY"), ==, "3780");
    g_assert_cmpstr(cl_image_get_meta(img, "ModifyTime"), ==, "2024-05-17T09:30:05Z");
    g_assert_cmpstr(cl_image_get_meta(img, "ColorType"), ==, "RGB, 8-bit");
    g_assert_null(cl_image_get_meta(img, "DecoderWarning"));
    g_assert_false(img->has_pixel_spacing); /* print resolution is not a physical spacing */
    g_assert_cmpuint(img->bits_allocated, ==, 8);
    g_assert_cmpstr(img->path, ==, find_fixture("png-rgb8.png")->path);

    g_autoptr(ClImage) il = cl_image_load(find_fixture("png-rgb16-adam7.png")->path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(cl_image_get_meta(il, "Interlace"), ==, "Adam7");
    g_assert_cmpuint(il->bits_allocated, ==, 16);
    g_autoptr(ClImage) low = cl_image_load(find_fixture("png-grey2.png")->path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(low->bits, ==, 2);
    g_assert_cmpuint(low->bits_allocated, ==, 8);
}

/* header_only (what `info` asks for): the sizes and every chunk's metadata, text after the pixels
 * too, and no pixels kept; the pixel data is still read through, so damage is still refused. */
static void test_header_only(void)
{
    ClImageLimits lim;
    cl_image_limits_init(&lim);
    lim.header_only = TRUE;
    const char *files[] = { "png-rgb8.png", "png-rgb16-adam7.png", "png-grey2.png" };
    for (guint k = 0; k < G_N_ELEMENTS(files); k++) {
        g_autoptr(GError) err = NULL;
        g_autoptr(ClImage) full = cl_image_load(find_fixture(files[k])->path, NULL, &err);
        g_assert_no_error(err);
        g_autoptr(ClImage) head = cl_image_load(find_fixture(files[k])->path, &lim, &err);
        g_assert_no_error(err);
        g_assert_cmpuint(head->width, ==, full->width);
        g_assert_cmpuint(head->height, ==, full->height);
        g_assert_cmpuint(head->channels, ==, full->channels);
        g_assert_cmpuint(head->bits, ==, full->bits);
        g_assert_cmpuint(cl_image_n_frames(head), ==, 1);
        g_assert_null(cl_image_frame(head, 0)->data);
        g_assert_nonnull(cl_image_frame(full, 0)->data);
        g_assert_cmpuint(head->metadata->len, ==, full->metadata->len);
        for (guint i = 0; i < full->metadata->len; i++) {
            const ClMetaEntry *a = g_ptr_array_index(full->metadata, i),
                              *b = g_ptr_array_index(head->metadata, i);
            g_assert_cmpstr(a->key, ==, b->key);
            g_assert_cmpstr(a->value, ==, b->value);
        }
    }
    /* the text chunk after IDAT is there; a damaged IDAT is refused as before */
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load(find_fixture("png-rgb8.png")->path, &lim, &err);
    g_assert_cmpstr(cl_image_get_meta(img, "Software"), ==, "fixtures-png (after IDAT)");
    g_autoptr(GBytes) b = read_fixture("png-rgb8.png");
    gsize len = 0;
    const guint8 *d = g_bytes_get_data(b, &len);
    g_autofree guint8 *copy = g_memdup2(d, len);
    gsize pos = chunk_offset(copy, len, "IDAT");
    copy[pos + 8 + 20] ^= 0xff; /* inside the compressed data (its CRC now fails too) */
    g_autoptr(ClImage) bad = cl_image_load_data(copy, len, "bad.png", &lim, &err);
    g_assert_null(bad);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    fixture_dir = cl_fixture_tmpdir("cl-test-png");
    fixtures = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autoptr(GError) err = NULL;
    if (!cl_fixtures_png(fixture_dir, fixtures, &err))
        g_error("writing PNG fixtures: %s", err->message);

    cl_fixture_add_tests("png", fixtures, test_fixture);
    g_test_add_func("/png/cross-check-gdk-pixbuf", test_cross_check_gdk_pixbuf);
    g_test_add_func("/png/huge-header", test_huge_header);
    g_test_add_func("/png/header-without-data", test_header_without_data);
    g_test_add_func("/png/not-png", test_not_png);
    g_test_add_func("/png/bad-crc", test_bad_crc);
    g_test_add_func("/png/metadata", test_metadata);
    g_test_add_func("/png/header-only", test_header_only);
    int rc = g_test_run();
    g_ptr_array_unref(fixtures);
    cl_fixture_rmdir(fixture_dir);
    g_free(fixture_dir);
    return rc;
}
