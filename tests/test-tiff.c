/* test-tiff.c - TIFF loader: every fixture value by value and under corruption, GeoTIFF fields,
 * metadata, limits before allocation, page chains (mixed, cyclic, very long), quiet errors. */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <tiffio.h>

#include "fixtures.h"

static char *tmpdir;
static GPtrArray *fixtures; /* ClFixture*, from cl_fixtures_tiff */

static const ClFixture *fixture(const char *file)
{
    for (guint i = 0; i < fixtures->len; i++) {
        const ClFixture *f = g_ptr_array_index(fixtures, i);
        g_autofree char *base = g_path_get_basename(f->path);
        if (strcmp(base, file) == 0)
            return f;
    }
    g_error("no fixture %s", file);
}

static ClImage *load_fixture(const char *file)
{
    g_autoptr(GError) err = NULL;
    ClImage *img = cl_image_load(fixture(file)->path, NULL, &err);
    g_assert_no_error(err);
    g_assert_nonnull(img);
    return img;
}

static guint8 *read_fixture(const char *file, gsize *len)
{
    char *data = NULL;
    g_assert_true(g_file_get_contents(fixture(file)->path, &data, len, NULL));
    return (guint8 *)data;
}

static void test_fixture(gconstpointer p)
{
    const ClFixture *f = p;
    g_autoptr(GError) err = NULL;
    if (!cl_fixture_load_and_check(f, &err))
        g_error("%s", err->message);
    guint tried = cl_fixture_corruption_sweep(f);
    g_assert_cmpuint(tried, >, 300);
}

/* ---- GeoTIFF ---- */

static void assert_close(double got, double want, const char *what)
{
    if (fabs(got - want) > 1e-9 * MAX(1.0, fabs(want)))
        g_error("%s: %.12g, expected %.12g", what, got, want);
}

static void test_geotiff_utm(void)
{
    g_autoptr(ClImage) img = load_fixture("geotiff-utm33n.tif");
    g_assert_nonnull(img->geo);
    const ClGeoInfo *g = img->geo;
    g_assert_cmpint(g->epsg, ==, 32633);
    g_assert_cmpstr(g->crs_name, ==, "WGS 84 / UTM zone 33N");
    g_assert_false(g->pixel_is_point);
    g_assert_true(g->has_transform);
    const double t[6] = { 399960.0, 10.0, 0.0, 5900040.0, 0.0, -10.0 };
    for (guint i = 0; i < 6; i++)
        assert_close(g->transform[i], t[i], "transform");
    assert_close(g->origin[0], 399960.0, "origin x");
    assert_close(g->origin[1], 5900040.0, "origin y");
    assert_close(g->pixel_size[0], 10.0, "pixel width");
    assert_close(g->pixel_size[1], 10.0, "pixel height");
    /* the keys are in the metadata too */
    g_assert_nonnull(strstr(cl_image_get_meta(img, "ProjectedCSTypeGeoKey"), "32633"));
    g_assert_nonnull(strstr(cl_image_get_meta(img, "GTModelTypeGeoKey"), "projected"));
    g_assert_nonnull(strstr(cl_image_get_meta(img, "GTRasterTypeGeoKey"), "PixelIsArea"));
    g_assert_cmpstr(cl_image_get_meta(img, "GTCitationGeoKey"), ==, "WGS 84 / UTM zone 33N");
    g_assert_nonnull(strstr(cl_image_get_meta(img, "ProjLinearUnitsGeoKey"), "metre"));
    g_assert_nonnull(cl_image_get_meta(img, "ModelTiepoint"));
    g_assert_nonnull(cl_image_get_meta(img, "ModelPixelScale"));
}

static void test_geotiff_matrix(void)
{
    g_autoptr(ClImage) img = load_fixture("geotiff-matrix.tif");
    g_assert_nonnull(img->geo);
    const ClGeoInfo *g = img->geo;
    g_assert_cmpint(g->epsg, ==, 3857);
    g_assert_cmpstr(g->crs_name, ==, "WGS 84 / Pseudo-Mercator"); /* no citation: known name */
    g_assert_true(g->pixel_is_point);
    g_assert_true(g->has_transform);
    /* matrix row 0 = (2, 0.5, 0, 1000), row 1 = (0.25, -2, 0, 5000); pixel-is-point moves the
     * origin half a pixel back to the corner of pixel (0, 0) */
    const double t[6] = { 1000.0 - 1.0 - 0.25, 2.0, 0.5, 5000.0 - 0.125 + 1.0, 0.25, -2.0 };
    for (guint i = 0; i < 6; i++)
        assert_close(g->transform[i], t[i], "transform");
    assert_close(g->origin[0], t[0], "origin x");
    assert_close(g->origin[1], t[3], "origin y");
    assert_close(g->pixel_size[0], hypot(2.0, 0.25), "pixel width");
    assert_close(g->pixel_size[1], hypot(0.5, 2.0), "pixel height");
    g_assert_nonnull(cl_image_get_meta(img, "ModelTransformation"));
}

static void test_no_geo(void)
{
    g_autoptr(ClImage) img = load_fixture("grey8-strips.tif");
    g_assert_null(img->geo);
}

/* ---- metadata ---- */

static void test_metadata(void)
{
    g_autoptr(ClImage) img = load_fixture("grey8-strips.tif");
    g_assert_cmpstr(cl_image_get_meta(img, "Software"), ==, "ChangeLens fixtures");
    g_assert_cmpstr(cl_image_get_meta(img, "DateTime"), ==, "2024:05:17 10:20:30");
    g_assert_cmpstr(cl_image_get_meta(img, "ImageDescription"), ==, "grey test pattern");
    g_assert_cmpstr(cl_image_get_meta(img, "Artist"), ==, "Test Artist");
    g_assert_cmpstr(cl_image_get_meta(img, "XResolution"), ==, "300");
    g_assert_cmpstr(cl_image_get_meta(img, "YResolution"), ==, "150");
    g_assert_cmpstr(cl_image_get_meta(img, "ResolutionUnit"), ==, "inch");
    g_assert_cmpstr(cl_image_get_meta(img, "Compression"), ==, "none");
    g_assert_cmpuint(img->bits_allocated, ==, 8);

    g_autoptr(ClImage) fl = load_fixture("float32-tiled.tif");
    g_assert_cmpstr(cl_image_get_meta(fl, "GDAL_NODATA"), ==, "-9999");
    g_assert_cmpstr(cl_image_get_meta(fl, "Compression"), ==, "Deflate");
    g_assert_cmpstr(cl_image_get_meta(fl, "Predictor"), ==, "floating point");
    g_assert_cmpstr(cl_image_get_meta(fl, "Tiles"), ==, "16 × 16");

    g_autoptr(ClImage) lzw = load_fixture("grey16-lzw-pred.tif");
    g_assert_cmpstr(cl_image_get_meta(lzw, "Compression"), ==, "LZW");

    g_autoptr(ClImage) big = load_fixture("bigtiff-rgb16.tif");
    g_assert_cmpstr(cl_image_get_meta(big, "BigTIFF"), ==, "yes");
    g_assert_cmpstr(cl_image_get_meta(big, "ByteOrder"), ==, "big-endian");

    g_autoptr(ClImage) bits = load_fixture("grey4.tif");
    g_assert_cmpuint(bits->bits, ==, 4);
    g_assert_cmpuint(bits->bits_allocated, ==, 8);
    g_autoptr(ClImage) d = load_fixture("float64.tif");
    g_assert_cmpuint(d->bits, ==, 64);
}

/* ---- pages ---- */

static void test_pages_mixed(void)
{
    g_autoptr(ClImage) img = load_fixture("pages-mixed.tif");
    g_assert_cmpuint(cl_image_n_frames(img), ==, 2);
    const char *note = cl_image_get_meta(img, "SkippedPages");
    g_assert_nonnull(note);
    g_assert_nonnull(strstr(note, "page 3"));
    g_assert_nonnull(strstr(note, "10 × 5"));
    g_assert_cmpstr(cl_image_get_meta(img, "Pages"), ==, "3");
}

static void test_pages_limits(void)
{
    const ClFixture *f = fixture("pages3-grey16.tif");
    ClImageLimits lim;
    cl_image_limits_init(&lim);
    lim.max_pixels = (guint64)f->width * f->height * 2; /* one page fits, three do not */
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load(f->path, &lim, &err);
    g_assert_null(img);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_assert_nonnull(strstr(err->message, f->path));

    cl_image_limits_init(&lim);
    lim.max_frames = 2;
    g_clear_error(&err);
    g_autoptr(ClImage) img2 = cl_image_load(f->path, &lim, &err);
    g_assert_null(img2);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_assert_nonnull(strstr(err->message, "pages"));
}

/* A little-endian classic TIFF built by hand: one 8-bit grey image whose strip (of data_len
 * bytes, filled with 0x5A) follows the directory. */
static GByteArray *handmade_tiff(guint32 width, guint32 height, guint32 data_len)
{
    GByteArray *b = g_byte_array_new();
    const guint16 n = 9;
    guint32 data_off = 8 + 2 + n * 12 + 4;
    struct {
        guint16 tag, type;
        guint32 count, value;
    } e[] = {
        { 256, 4, 1, width }, { 257, 4, 1, height }, { 258, 3, 1, 8 },
        { 259, 3, 1, 1 },     { 262, 3, 1, 1 },      { 273, 4, 1, data_off },
        { 277, 3, 1, 1 },     { 278, 4, 1, height }, { 279, 4, 1, data_len },
    };
    g_byte_array_append(b, (const guint8 *)"II*\0\x08\0\0\0", 8);
    guint8 tmp[12];
    tmp[0] = n & 0xff;
    tmp[1] = n >> 8;
    g_byte_array_append(b, tmp, 2);
    for (guint i = 0; i < n; i++) {
        guint32 v = e[i].value;
        guint8 ent[12] = { e[i].tag & 0xff,
                           e[i].tag >> 8,
                           e[i].type,
                           0,
                           e[i].count & 0xff,
                           (e[i].count >> 8) & 0xff,
                           0,
                           0,
                           v & 0xff,
                           (v >> 8) & 0xff,
                           (v >> 16) & 0xff,
                           v >> 24 };
        if (e[i].type == 3) /* SHORT values are left-justified */
            ent[10] = ent[11] = 0;
        g_byte_array_append(b, ent, 12);
    }
    memset(tmp, 0, 4);
    g_byte_array_append(b, tmp, 4); /* no next directory */
    for (guint32 i = 0; i < data_len; i++) {
        guint8 v = 0x5A;
        g_byte_array_append(b, &v, 1);
    }
    return b;
}

static void test_too_large(void)
{
    g_autoptr(GByteArray) b = handmade_tiff(200000, 200000, 64);
    g_autoptr(GError) err = NULL;
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(ClImage) img = cl_image_load_data(b->data, b->len, "huge.tif", NULL, &err);
    g_assert_null(img);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_assert_nonnull(strstr(err->message, "huge.tif"));
    g_assert_nonnull(strstr(err->message, "200000"));
    /* refused from the header: no 160 GB of floats allocated and filled first */
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 2 * G_USEC_PER_SEC);

    /* the same header with a sane size loads, so the refusal above is about the size */
    g_autoptr(GByteArray) ok = handmade_tiff(8, 8, 64);
    g_clear_error(&err);
    g_autoptr(ClImage) small = cl_image_load_data(ok->data, ok->len, "small.tif", NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpfloat(cl_image_plane(small, 0, 0)[63], ==, 0x5A);

    /* one big uncompressed strip, which libtiff splits into virtual strips behind our back */
    g_autoptr(GByteArray) big = handmade_tiff(300, 200, 60000);
    g_clear_error(&err);
    g_autoptr(ClImage) one = cl_image_load_data(big->data, big->len, "strip.tif", NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpfloat(cl_image_plane(one, 0, 0)[0], ==, 0x5A);
    g_assert_cmpfloat(cl_image_plane(one, 0, 0)[59999], ==, 0x5A);
    g_autoptr(ClImage) cut = cl_image_load_data(big->data, big->len - 301, "strip.tif", NULL, &err);
    g_assert_null(cut);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
}

static void test_truncated_data(void)
{
    /* the directory is intact, the pixel data is cut: must fail, not return zeros */
    g_autoptr(GByteArray) b = handmade_tiff(16, 16, 256);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load_data(b->data, b->len - 100, "cut.tif", NULL, &err);
    g_assert_null(img);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    g_assert_nonnull(strstr(err->message, "cut.tif"));
    g_assert_nonnull(strstr(err->message, "truncated"));

    /* the same for compressed fixtures, cut in the middle of their pixel data */
    const char *files[] = { "grey16-lzw-pred.tif", "int16-deflate.tif",   "rgb8-packbits.tif",
                            "float32-tiled.tif",   "bands7-separate.tif", "bilevel-g4.tif",
                            "jpeg-ycbcr.tif",      "ycbcr-raw.tif" };
    for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
        gsize len;
        g_autofree guint8 *data = read_fixture(files[i], &len);
        g_autoptr(GError) e2 = NULL;
        g_autoptr(ClImage) cut = cl_image_load_data(data, len - len / 5, files[i], NULL, &e2);
        if (cut)
            g_error("%s cut to %" G_GSIZE_FORMAT " bytes loaded", files[i], len - len / 5);
        g_assert_error(e2, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    }
}

/* Offset of the next-IFD link of the directory at ifd (classic little-endian TIFF). */
static gsize next_link(const guint8 *d, guint32 ifd)
{
    guint16 n = (guint16)(d[ifd] | d[ifd + 1] << 8);
    return ifd + 2 + 12 * (gsize)n;
}

static guint32 rd32(const guint8 *p)
{
    return (guint32)p[0] | (guint32)p[1] << 8 | (guint32)p[2] << 16 | (guint32)p[3] << 24;
}

static void wr32(guint8 *p, guint32 v)
{
    p[0] = v & 0xff;
    p[1] = (v >> 8) & 0xff;
    p[2] = (v >> 16) & 0xff;
    p[3] = v >> 24;
}

static void test_cyclic_ifd(void)
{
    gsize len;
    g_autofree guint8 *data = read_fixture("pages3-grey16.tif", &len);
    guint32 ifd0 = rd32(data + 4);
    guint32 ifd1 = rd32(data + next_link(data, ifd0));
    guint32 ifd2 = rd32(data + next_link(data, ifd1));
    g_assert_cmpuint(ifd1, >, 0);
    g_assert_cmpuint(ifd2, >, 0);

    /* page 3 links back to page 1; then page 1 links to itself */
    guint32 targets[][2] = { { ifd2, ifd0 }, { ifd0, ifd0 }, { ifd1, ifd1 } };
    for (guint i = 0; i < G_N_ELEMENTS(targets); i++) {
        g_autofree guint8 *copy = g_memdup2(data, len);
        wr32(copy + next_link(copy, targets[i][0]), targets[i][1]);
        g_autoptr(GError) err = NULL;
        gint64 t0 = g_get_monotonic_time();
        g_autoptr(ClImage) img = cl_image_load_data(copy, len, "cycle.tif", NULL, &err);
        g_assert_cmpint(g_get_monotonic_time() - t0, <, 2 * G_USEC_PER_SEC);
        g_assert_null(img);
        g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
        g_assert_nonnull(strstr(err->message, "cycle.tif"));
    }
}

static void test_many_pages(void)
{
    /* 5000 tiny pages: over the default frame limit (4096), counted with a bound */
    g_autofree char *path = g_build_filename(tmpdir, "many-pages.tif", NULL);
    TIFF *tif = TIFFOpen(path, "w");
    g_assert_nonnull(tif);
    for (guint p = 0; p < 5000; p++) {
        guint8 v = (guint8)p;
        TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, 1);
        TIFFSetField(tif, TIFFTAG_IMAGELENGTH, 1);
        TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
        TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1);
        TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
        TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, 1);
        g_assert_cmpint(TIFFWriteEncodedStrip(tif, 0, &v, 1), ==, 1);
        g_assert_true(TIFFWriteDirectory(tif));
    }
    TIFFClose(tif);

    g_autoptr(GError) err = NULL;
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(ClImage) img = cl_image_load(path, NULL, &err);
    g_assert_null(img);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_assert_nonnull(strstr(err->message, "4096"));
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 10 * G_USEC_PER_SEC);

    ClImageLimits lim;
    cl_image_limits_init(&lim);
    lim.max_frames = 8;
    g_clear_error(&err);
    t0 = g_get_monotonic_time();
    g_autoptr(ClImage) img2 = cl_image_load(path, &lim, &err);
    g_assert_null(img2);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_assert_cmpint(g_get_monotonic_time() - t0, <, G_USEC_PER_SEC);

    lim.max_frames = 5000;
    g_clear_error(&err);
    g_autoptr(ClImage) all = cl_image_load(path, &lim, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(cl_image_n_frames(all), ==, 5000);
    g_assert_cmpfloat(cl_image_plane(all, 4999, 0)[0], ==, (guint8)4999);
}

/* ---- errors ---- */

static void test_unsupported_compression(void)
{
    gsize len;
    g_autofree guint8 *data = read_fixture("grey8-strips.tif", &len);
    guint32 ifd = rd32(data + 4);
    guint16 n = (guint16)(data[ifd] | data[ifd + 1] << 8);
    gboolean patched = FALSE;
    for (guint i = 0; i < n; i++) {
        guint8 *e = data + ifd + 2 + 12 * i;
        if ((e[0] | e[1] << 8) == TIFFTAG_COMPRESSION) {
            e[8] = COMPRESSION_JP2000 & 0xff; /* a codec libtiff does not carry */
            e[9] = COMPRESSION_JP2000 >> 8;
            patched = TRUE;
        }
    }
    g_assert_true(patched);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load_data(data, len, "j2k.tif", NULL, &err);
    g_assert_null(img);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNSUPPORTED);
    g_assert_nonnull(strstr(err->message, "j2k.tif"));
    g_assert_nonnull(strstr(err->message, "JPEG 2000"));
}

static void test_not_tiff(void)
{
    static const guint8 junk[] = "II*\0\xff\xff\xff\x7f garbage";
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load_data(junk, sizeof junk - 1, NULL, NULL, &err);
    g_assert_null(img);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    g_assert_true(g_str_has_prefix(err->message, "image: "));
}

/* libtiff and libgeotiff messages must end up in the GError, never on stderr. */
static void test_quiet(void)
{
    if (g_test_subprocess()) {
        const char *files[] = { "grey16-lzw-pred.tif", "geotiff-utm33n.tif", "jpeg-ycbcr.tif",
                                "pages3-grey16.tif" };
        for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
            gsize len;
            g_autofree guint8 *data = read_fixture(files[i], &len);
            for (gsize cut = 0; cut < len; cut += 1 + cut / 8) {
                g_autoptr(GError) err = NULL;
                g_autoptr(ClImage) img = cl_image_load_data(data, cut, "q.tif", NULL, &err);
                (void)img;
            }
            for (gsize pos = 0; pos < MIN(len, (gsize)600); pos += 3) {
                g_autofree guint8 *copy = g_memdup2(data, len);
                copy[pos] ^= 0xA5;
                g_autoptr(GError) err = NULL;
                g_autoptr(ClImage) img = cl_image_load_data(copy, len, "q.tif", NULL, &err);
                (void)img;
            }
        }
        return;
    }
    g_test_trap_subprocess(NULL, 120 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    g_test_trap_assert_stderr("");
    g_test_trap_assert_stdout("");
}

/* Concurrent loads keep their messages apart (per-handle libtiff error handlers). */
typedef struct {
    guint id;
    gboolean ok;
} ThreadJob;

static gpointer load_thread(gpointer p)
{
    ThreadJob *job = p;
    gsize len;
    const char *file = job->id % 2 ? "grey16-lzw-pred.tif" : "bands7-separate.tif";
    g_autofree guint8 *good = read_fixture(file, &len);
    g_autofree char *name = g_strdup_printf("thread-%u.tif", job->id);
    job->ok = TRUE;
    for (guint round = 0; round < 40; round++) {
        g_autoptr(GError) err = NULL;
        gsize cut = round % 2 ? len * 9 / 10 : len;
        g_autoptr(ClImage) img = cl_image_load_data(good, cut, name, NULL, &err);
        if (cut == len)
            job->ok = job->ok && img != NULL;
        else if (img || !err || !strstr(err->message, name))
            job->ok = FALSE;
        else {
            /* nothing from another thread's file in this message */
            g_auto(GStrv) parts = g_strsplit(err->message, name, -1);
            g_autofree char *rest = g_strjoinv("", parts);
            job->ok = job->ok && !strstr(rest, "thread-");
        }
    }
    return NULL;
}

static void test_threads(void)
{
    ThreadJob jobs[6];
    GThread *threads[6];
    for (guint i = 0; i < 6; i++) {
        jobs[i] = (ThreadJob){ i, FALSE };
        threads[i] = g_thread_new("tiff", load_thread, &jobs[i]);
    }
    for (guint i = 0; i < 6; i++) {
        g_thread_join(threads[i]);
        g_assert_true(jobs[i].ok);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    tmpdir = cl_fixture_tmpdir("cl-test-tiff");
    fixtures = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autoptr(GError) err = NULL;
    if (!cl_fixtures_tiff(tmpdir, fixtures, &err))
        g_error("writing TIFF fixtures: %s", err->message);
    g_assert_cmpuint(fixtures->len, >=, 20);
    cl_fixture_add_tests("tiff", fixtures, test_fixture);
    g_test_add_func("/tiff/geotiff/utm", test_geotiff_utm);
    g_test_add_func("/tiff/geotiff/matrix", test_geotiff_matrix);
    g_test_add_func("/tiff/geotiff/none", test_no_geo);
    g_test_add_func("/tiff/metadata", test_metadata);
    g_test_add_func("/tiff/pages/mixed", test_pages_mixed);
    g_test_add_func("/tiff/pages/limits", test_pages_limits);
    g_test_add_func("/tiff/pages/cyclic", test_cyclic_ifd);
    g_test_add_func("/tiff/pages/many", test_many_pages);
    g_test_add_func("/tiff/limits/too-large", test_too_large);
    g_test_add_func("/tiff/errors/truncated-data", test_truncated_data);
    g_test_add_func("/tiff/errors/unsupported-compression", test_unsupported_compression);
    g_test_add_func("/tiff/errors/not-tiff", test_not_tiff);
    g_test_add_func("/tiff/errors/quiet", test_quiet);
    g_test_add_func("/tiff/threads", test_threads);
    int rc = g_test_run();
    g_ptr_array_unref(fixtures);
    cl_fixture_rmdir(tmpdir);
    g_free(tmpdir);
    return rc;
}
