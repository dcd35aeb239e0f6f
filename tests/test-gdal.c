/* test-gdal.c - the GDAL loader: rasters written here with GDAL's API (ENVI, JPEG 2000, netCDF,
 * NITF, VRT, GeoTIFF) and with HDF5's own API read back value by value with their CRS,
 * transform, nodata, scale/offset and band descriptions; oversize rasters read at an overview or
 * decimated scale; corrupt files refused. */
#include <gdal.h>
#include <hdf5.h>
#include <cpl_conv.h>
#include <cpl_error.h>
#include <ogr_srs_api.h>

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "fixtures.h"
#include "image/geoexport.h"
#include "image/loaders.h"
#include <ogr_api.h>

static char *tmpdir;

/* (b, x, y) -> the stored value of the small fixtures: distinct, some negative */
static double fixture_value(int b, int x, int y)
{
    return b * 1000 + y * 10 + x - 20;
}

static OGRSpatialReferenceH srs_epsg(int code)
{
    OGRSpatialReferenceH s = OSRNewSpatialReference(NULL);
    g_assert_cmpint(OSRImportFromEPSG(s, code), ==, OGRERR_NONE);
    OSRSetAxisMappingStrategy(s, OAMS_TRADITIONAL_GIS_ORDER);
    return s;
}

/* W × H, n bands of Int16 fixture values, a nodata pixel (band 1 at (1, 2)), scale/offset,
 * band descriptions, EPSG:32633 and a 10 m grid; written by DRIVER (Create, or CreateCopy from a
 * MEM dataset when the driver cannot create). */
static const double utm_t[6] = { 500000, 10, 0, 4600000, 0, -10 };
static char *write_fixture(const char *driver, const char *file, int w, int h, int n,
                           GDALDataType type, char **options)
{
    g_autofree char *path = g_build_filename(tmpdir, file, NULL);
    GDALDriverH mem = GDALGetDriverByName("MEM");
    GDALDatasetH ds = GDALCreate(mem, "", w, h, n, type, NULL);
    g_assert_nonnull(ds);
    double t[6];
    memcpy(t, utm_t, sizeof t);
    GDALSetGeoTransform(ds, t);
    OGRSpatialReferenceH s = srs_epsg(32633);
    GDALSetSpatialRef(ds, s);
    OSRDestroySpatialReference(s);
    float *buf = g_new(float, (gsize)w * h);
    for (int b = 0; b < n; b++) {
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                buf[y * w + x] = (float)fixture_value(b, x, y);
        if (b == 0)
            buf[2 * w + 1] = -9999;
        GDALRasterBandH band = GDALGetRasterBand(ds, b + 1);
        g_assert_cmpint(GDALRasterIO(band, GF_Write, 0, 0, w, h, buf, w, h, GDT_Float32, 0, 0), ==,
                        CE_None);
        if (b == 0)
            GDALSetRasterNoDataValue(band, -9999);
        GDALSetRasterScale(band, 0.5);
        GDALSetRasterOffset(band, 10);
        g_autofree char *d = g_strdup_printf("band-%c", 'A' + b);
        GDALSetDescription(band, d);
    }
    g_free(buf);
    GDALDatasetH out =
        GDALCreateCopy(GDALGetDriverByName(driver), path, ds, TRUE, options, NULL, NULL);
    g_assert_nonnull(out);
    GDALClose(out);
    GDALClose(ds);
    return g_steal_pointer(&path);
}

static void check_fixture_values(const ClImage *img, int w, int h, int n)
{
    g_assert_cmpuint(img->width, ==, (guint)w);
    g_assert_cmpuint(img->height, ==, (guint)h);
    g_assert_cmpuint(img->channels, ==, (guint)n);
    g_assert_cmpuint(cl_image_n_frames(img), ==, 1);
    for (int b = 0; b < n; b++) {
        const float *p = cl_image_plane(img, 0, (guint)b);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                if (b == 0 && x == 1 && y == 2) {
                    g_assert_true(isnan(p[y * w + x])); /* nodata */
                    continue;
                }
                g_assert_cmpfloat(p[y * w + x], ==, fixture_value(b, x, y));
            }
    }
    const ClFrame *f = cl_image_frame(img, 0);
    g_assert_cmpfloat(f->rescale_slope, ==, 0.5);
    g_assert_cmpfloat(f->rescale_intercept, ==, 10);
}

static void check_utm_geo(const ClImage *img, double scale)
{
    g_assert_nonnull(img->geo);
    g_assert_cmpint(img->geo->epsg, ==, 32633);
    g_assert_nonnull(img->geo->crs_name);
    g_assert_nonnull(strstr(img->geo->crs_name, "UTM zone 33N"));
    g_assert_nonnull(img->geo->crs_wkt);
    g_assert_true(img->geo->has_transform);
    g_assert_cmpfloat(img->geo->transform[0], ==, utm_t[0]);
    g_assert_cmpfloat(img->geo->transform[1], ==, utm_t[1] * scale);
    g_assert_cmpfloat(img->geo->transform[2], ==, 0);
    g_assert_cmpfloat(img->geo->transform[3], ==, utm_t[3]);
    g_assert_cmpfloat(img->geo->transform[4], ==, 0);
    g_assert_cmpfloat(img->geo->transform[5], ==, utm_t[5] * scale);
    g_assert_cmpfloat(img->geo->pixel_size[0], ==, 10 * scale);
    g_assert_cmpfloat(img->geo->origin[1], ==, 4600000);
}

/* a metadata entry with this key whose value contains text */
static gboolean has_meta(const ClImage *img, const char *key, const char *text)
{
    for (guint i = 0; i < img->metadata->len; i++) {
        const ClMetaEntry *e = g_ptr_array_index(img->metadata, i);
        if (strcmp(e->key, key) == 0 && strstr(e->value, text))
            return TRUE;
    }
    return FALSE;
}

static void test_envi(void)
{
    g_autofree char *path = write_fixture("ENVI", "small.envi", 7, 5, 2, GDT_Int16, NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load(path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpint(img->format, ==, CL_IMAGE_FORMAT_GDAL);
    g_assert_cmpstr(cl_image_format_name(img->format), ==, "GDAL");
    g_assert_true(has_meta(img, "GDALDriver", "ENVI"));
    g_assert_cmpint(img->layout, ==, CL_LAYOUT_BANDS);
    g_assert_cmpuint(img->bits, ==, 16);
    g_assert_cmpint(img->sample_format, ==, CL_SAMPLE_INT);
    check_fixture_values(img, 7, 5, 2);
    check_utm_geo(img, 1);
    g_assert_true(has_meta(img, "BandDescription", "band 1: band-A"));
    g_assert_true(has_meta(img, "BandDescription", "band 2: band-B"));
    g_assert_true(has_meta(img, "NoData", "band 1: -9999"));
    g_assert_true(has_meta(img, "ScaleOffset", "band 2: value = stored × 0.5 + 10"));
    /* statistics skip the nodata pixel and apply the scale */
    ClFrameStats st;
    cl_image_frame_stats(img, 0, &st);
    g_assert_cmpfloat(st.min, ==, fixture_value(0, 0, 0) * 0.5 + 10);
    g_assert_cmpfloat(st.max, ==, fixture_value(1, 6, 4) * 0.5 + 10);

    /* `info` without --stats: the same description, no pixels */
    ClImageLimits lim;
    cl_image_limits_init(&lim);
    lim.header_only = TRUE;
    g_autoptr(ClImage) head = cl_image_load(path, &lim, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(head->width, ==, 7);
    g_assert_cmpuint(head->channels, ==, 2);
    g_assert_null(cl_image_frame(head, 0)->data);
    g_assert_cmpint(head->geo->epsg, ==, 32633);
    g_assert_cmpfloat(cl_image_frame(head, 0)->rescale_slope, ==, 0.5);
}

static void test_jp2(void)
{
    if (!GDALGetDriverByName("JP2OpenJPEG")) {
        g_test_skip("GDAL has no JP2OpenJPEG driver in this build");
        return;
    }
    char *opts[] = { "REVERSIBLE=YES", "QUALITY=100", NULL };
    g_autofree char *path = write_fixture("JP2OpenJPEG", "small.jp2", 9, 6, 1, GDT_Int16, opts);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load(path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpint(img->format, ==, CL_IMAGE_FORMAT_GDAL);
    g_assert_true(has_meta(img, "GDALDriver", "JP2OpenJPEG"));
    g_assert_cmpint(img->layout, ==, CL_LAYOUT_GREY);
    g_assert_cmpuint(img->bits_allocated, ==, 16);
    g_assert_cmpint(img->sample_format, ==, CL_SAMPLE_INT);
    check_fixture_values(img, 9, 6, 1); /* lossless; nodata and scale from the .aux.xml beside it */
    check_utm_geo(img, 1);
    g_assert_true(has_meta(img, "BandDescription", "band 1: band-A"));
    g_assert_cmpfloat(cl_image_frame(img, 0)->rescale_slope, ==, 0.5);

    /* the same bytes from memory (no .aux.xml): values and georeferencing from the JP2 boxes */
    g_autofree char *bytes = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(path, &bytes, &len, NULL));
    g_autoptr(ClImage) mem =
        cl_image_load_data((const guint8 *)bytes, len, "small.jp2", NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(mem->width, ==, 9);
    g_assert_cmpfloat(cl_image_plane(mem, 0, 0)[5 * 9 + 8], ==, fixture_value(0, 8, 5));
    g_assert_cmpint(mem->geo->epsg, ==, 32633);

    /* cut in half: a clear error, no crash */
    g_autofree char *cut = g_build_filename(tmpdir, "cut.jp2", NULL);
    g_assert_true(g_file_set_contents(cut, bytes, (gssize)len / 2, NULL));
    g_autoptr(ClImage) bad = cl_image_load(cut, NULL, &err);
    g_assert_null(bad);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    g_assert_nonnull(strstr(err->message, "cut.jp2"));
    g_test_message("truncated JPEG 2000: %s", err->message);
}

/* 4 × 4 blocks of one value each, so that any resampling of a power-of-two scale keeps them */
static float block_value(int x, int y, int scale)
{
    return (float)((y / scale) * 1000 + x / scale);
}

static char *write_blocks(const char *driver, const char *file, int w, int h, gboolean overviews)
{
    g_autofree char *path = g_build_filename(tmpdir, file, NULL);
    GDALDatasetH ds = GDALCreate(GDALGetDriverByName(driver), path, w, h, 1, GDT_Float32, NULL);
    g_assert_nonnull(ds);
    double t[6];
    memcpy(t, utm_t, sizeof t);
    GDALSetGeoTransform(ds, t);
    OGRSpatialReferenceH s = srs_epsg(32633);
    GDALSetSpatialRef(ds, s);
    OSRDestroySpatialReference(s);
    float *buf = g_new(float, (gsize)w * h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            buf[y * w + x] = block_value(x, y, 4);
    g_assert_cmpint(
        GDALRasterIO(GDALGetRasterBand(ds, 1), GF_Write, 0, 0, w, h, buf, w, h, GDT_Float32, 0, 0),
        ==, CE_None);
    g_free(buf);
    if (overviews) {
        int levels[] = { 2, 4 };
        g_assert_cmpint(GDALBuildOverviews(ds, "NEAREST", 2, levels, 0, NULL, NULL, NULL), ==,
                        CE_None);
    }
    GDALClose(ds);
    return g_steal_pointer(&path);
}

static void check_blocks(const ClImage *img, guint w, guint h)
{
    g_assert_cmpuint(img->width, ==, w);
    g_assert_cmpuint(img->height, ==, h);
    const float *p = cl_image_plane(img, 0, 0);
    for (guint y = 0; y < h; y++)
        for (guint x = 0; x < w; x++)
            g_assert_cmpfloat(p[y * w + x], ==, block_value((int)x, (int)y, 1));
}

/* A GeoTIFF with overviews (a COG's shape) over the pixel budget: the TIFF loader refuses it,
 * GDAL reads the 1/4 overview that fits; the transform is the overview's. */
static void test_overview(void)
{
    g_autofree char *path = write_blocks("GTiff", "big-ovr.tif", 256, 128, TRUE);
    ClImageLimits lim;
    cl_image_limits_init(&lim);
    lim.max_pixels = 64 * 32;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load(path, &lim, &err);
    g_assert_no_error(err);
    g_assert_cmpint(img->format, ==, CL_IMAGE_FORMAT_GDAL);
    check_blocks(img, 64, 32);
    g_assert_true(has_meta(img, "Resolution", "read at 1/4 scale: the full raster is 256 × 128"));
    g_assert_true(has_meta(img, "Resolution", "GDAL overview 2"));
    check_utm_geo(img, 4);
    /* within the budget the TIFF loader reads it whole, as before */
    g_autoptr(ClImage) whole = cl_image_load(path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpint(whole->format, ==, CL_IMAGE_FORMAT_TIFF);
    g_assert_cmpuint(whole->width, ==, 256);
}

/* No overviews: a decimated read (every 4th sample) that fits. */
static void test_decimated(void)
{
    g_autofree char *path = write_blocks("ENVI", "big.envi", 200, 100, FALSE);
    ClImageLimits lim;
    cl_image_limits_init(&lim);
    lim.max_pixels = 50 * 25;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load(path, &lim, &err);
    g_assert_no_error(err);
    check_blocks(img, 50, 25);
    g_assert_true(has_meta(img, "Resolution", "read at 1/4 scale: the full raster is 200 × 100"));
    check_utm_geo(img, 4);
    /* too many bands is still refused before reading */
    lim.max_pixels = (guint64)1 << 28;
    lim.max_channels = 0;
    g_autoptr(ClImage) none = cl_image_load(path, &lim, &err);
    g_assert_null(none);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
}

/* netCDF with two variables: the container opens its first subdataset and lists both; FILE:VAR
 * and FILE:N pick one. */
static void test_subdatasets(void)
{
    GDALDriverH nc = GDALGetDriverByName("netCDF");
    if (!nc) {
        g_test_skip("GDAL has no netCDF driver in this build");
        return;
    }
    g_autofree char *path = g_build_filename(tmpdir, "two.nc", NULL);
    GDALDatasetH ds = GDALCreateMultiDimensional(nc, path, NULL, NULL);
    g_assert_nonnull(ds);
    GDALGroupH root = GDALDatasetGetRootGroup(ds);
    GDALDimensionH dims[2] = {
        GDALGroupCreateDimension(root, "y", NULL, NULL, 3, NULL),
        GDALGroupCreateDimension(root, "x", NULL, NULL, 4, NULL),
    };
    GDALExtendedDataTypeH ft = GDALExtendedDataTypeCreate(GDT_Float32);
    const char *names[2] = { "temp", "rain" };
    for (int v = 0; v < 2; v++) {
        GDALMDArrayH a = GDALGroupCreateMDArray(root, names[v], 2, dims, ft, NULL);
        g_assert_nonnull(a);
        float vals[12];
        for (int i = 0; i < 12; i++)
            vals[i] = (float)(v * 100 + i);
        GUInt64 start[2] = { 0, 0 };
        size_t count[2] = { 3, 4 };
        g_assert_true(GDALMDArrayWrite(a, start, count, NULL, NULL, ft, vals, vals, sizeof vals));
        GDALMDArrayRelease(a);
    }
    GDALExtendedDataTypeRelease(ft);
    GDALDimensionRelease(dims[0]);
    GDALDimensionRelease(dims[1]);
    GDALGroupRelease(root);
    GDALClose(ds);

    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) first = cl_image_load(path, NULL, &err);
    g_assert_no_error(err);
    g_assert_true(has_meta(first, "Subdataset", ":temp"));
    g_assert_true(has_meta(first, "Subdataset", ":rain"));
    g_assert_true(has_meta(first, "SubdatasetOpened", ":temp"));
    g_assert_cmpuint(first->width, ==, 4);
    g_assert_cmpuint(first->height, ==, 3);
    /* netCDF stores rows bottom-up unless told; GDAL flips them: check the set, not the order */
    const float *p = cl_image_plane(first, 0, 0);
    double sum = 0;
    for (int i = 0; i < 12; i++)
        sum += p[i];
    g_assert_cmpfloat(sum, ==, 66);

    g_autofree char *by_name = g_strdup_printf("%s:rain", path);
    g_autoptr(ClImage) rain = cl_image_load(by_name, NULL, &err);
    g_assert_no_error(err);
    g_assert_true(has_meta(rain, "SubdatasetOpened", ":rain"));
    sum = 0;
    for (int i = 0; i < 12; i++)
        sum += cl_image_plane(rain, 0, 0)[i];
    g_assert_cmpfloat(sum, ==, 1266);
    g_autofree char *by_number = g_strdup_printf("%s:2", path);
    g_autoptr(ClImage) second = cl_image_load(by_number, NULL, &err);
    g_assert_no_error(err);
    g_assert_true(has_meta(second, "SubdatasetOpened", ":rain"));

    g_autofree char *missing = g_strdup_printf("%s:snow", path);
    g_autoptr(ClImage) none = cl_image_load(missing, NULL, &err);
    g_assert_null(none);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO);
    g_assert_nonnull(strstr(err->message, "no subdataset 'snow'"));
}

/* A VRT of the ENVI fixture: the same values, CRS and transform through the virtual raster; a
 * VRT whose source file is missing is refused naming the file. */
static void test_vrt(void)
{
    g_autofree char *src = write_fixture("ENVI", "vrt-source.envi", 7, 5, 2, GDT_Int16, NULL);
    g_autofree char *path = g_build_filename(tmpdir, "small.vrt", NULL);
    GDALDatasetH in = GDALOpen(src, GA_ReadOnly);
    g_assert_nonnull(in);
    GDALDatasetH out =
        GDALCreateCopy(GDALGetDriverByName("VRT"), path, in, FALSE, NULL, NULL, NULL);
    g_assert_nonnull(out);
    GDALClose(out);
    GDALClose(in);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load(path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpint(img->format, ==, CL_IMAGE_FORMAT_GDAL);
    g_assert_true(has_meta(img, "GDALDriver", "VRT"));
    check_fixture_values(img, 7, 5, 2);
    check_utm_geo(img, 1);

    /* the source gone: an error, not a crash or an empty image */
    g_autofree char *hdr = g_build_filename(tmpdir, "vrt-source.hdr", NULL);
    g_assert_cmpint(g_unlink(src), ==, 0);
    g_unlink(hdr);
    g_autoptr(ClImage) gone = cl_image_load(path, NULL, &err);
    g_assert_null(gone);
    g_assert_nonnull(err);
    g_test_message("VRT without its source: %s", err->message);
    g_assert_nonnull(strstr(err->message, "small.vrt"));
}

/* NITF (GDAL's NITF driver): the values and the UTM grid from the file's IGEOLO corners. */
static void test_nitf(void)
{
    if (!GDALGetDriverByName("NITF")) {
        g_test_skip("GDAL has no NITF driver in this build");
        return;
    }
    g_autofree char *path = write_fixture("NITF", "small.ntf", 7, 5, 2, GDT_Int16, NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load(path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpint(img->format, ==, CL_IMAGE_FORMAT_GDAL);
    g_assert_true(has_meta(img, "GDALDriver", "NITF"));
    g_assert_cmpint(img->sample_format, ==, CL_SAMPLE_INT);
    /* nodata, scale/offset and band names travel in GDAL's .aux.xml beside the file */
    check_fixture_values(img, 7, 5, 2);
    g_assert_true(has_meta(img, "BandDescription", "band 2: band-B"));
    g_assert_nonnull(img->geo);
    g_assert_true(img->geo->has_transform);
    g_assert_cmpfloat(fabs(img->geo->transform[0] - utm_t[0]), <, 1e-6);
    g_assert_cmpfloat(fabs(img->geo->transform[3] - utm_t[3]), <, 1e-6);
    g_assert_cmpfloat(fabs(img->geo->pixel_size[0] - 10), <, 1e-6);
    g_assert_nonnull(img->geo->crs_name);
    g_test_message("NITF CRS: %s (EPSG %d)", img->geo->crs_name, img->geo->epsg);
    g_assert_nonnull(strstr(img->geo->crs_name, "UTM zone 33N"));
}

/* HDF5 written with HDF5's own API (GDAL cannot write it): two 2-D datasets in a group, the first
 * opened by default, the second by name, both value by value. */
static void test_hdf5(void)
{
    if (!GDALGetDriverByName("HDF5")) {
        g_test_skip("GDAL has no HDF5 driver in this build");
        return;
    }
    g_autofree char *path = g_build_filename(tmpdir, "two.h5", NULL);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    g_assert_cmpint(f, >=, 0);
    hid_t g = H5Gcreate2(f, "scene", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[2] = { 3, 4 };
    const char *names[2] = { "red", "nir" };
    for (int v = 0; v < 2; v++) {
        hid_t space = H5Screate_simple(2, dims, NULL);
        hid_t d = H5Dcreate2(g, names[v], H5T_NATIVE_USHORT, space, H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT);
        unsigned short vals[12];
        for (int i = 0; i < 12; i++)
            vals[i] = (unsigned short)(v * 1000 + i * 7);
        g_assert_cmpint(H5Dwrite(d, H5T_NATIVE_USHORT, H5S_ALL, H5S_ALL, H5P_DEFAULT, vals), >=, 0);
        H5Dclose(d);
        H5Sclose(space);
    }
    H5Gclose(g);
    H5Fclose(f);

    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) first = cl_image_load(path, NULL, &err);
    g_assert_no_error(err);
    g_assert_true(has_meta(first, "GDALDriver", "HDF5"));
    g_assert_true(has_meta(first, "Subdataset", "red"));
    g_assert_true(has_meta(first, "Subdataset", "nir"));
    g_assert_cmpuint(first->width, ==, 4);
    g_assert_cmpuint(first->height, ==, 3);
    g_assert_cmpint(first->sample_format, ==, CL_SAMPLE_UINT);
    g_assert_cmpuint(first->bits, ==, 16);
    /* which of the two GDAL lists first is its business; the values say which one it is */
    const float *p = cl_image_plane(first, 0, 0);
    const int v0 = p[0] >= 1000;
    for (int i = 0; i < 12; i++)
        g_assert_cmpfloat(p[i], ==, v0 * 1000 + i * 7);
    g_autofree char *by_name = g_strdup_printf("%s:%s", path, v0 ? "red" : "nir");
    g_autoptr(ClImage) other = cl_image_load(by_name, NULL, &err);
    g_assert_no_error(err);
    for (int i = 0; i < 12; i++)
        g_assert_cmpfloat(cl_image_plane(other, 0, 0)[i], ==, (1 - v0) * 1000 + i * 7);
    /* or by its path in the file */
    g_autofree char *by_path = g_strdup_printf("%s:/scene/%s", path, v0 ? "red" : "nir");
    g_autoptr(ClImage) same = cl_image_load(by_path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpfloat(cl_image_plane(same, 0, 0)[1], ==, (1 - v0) * 1000 + 7);
}

/* A JPEG 2000 codestream of 9 × 7 pixels whose SIZ marker declares tiles of 1073741833 × 7
 * (found by tests/fuzz/fuzz-gdal.c): GDAL would allocate a 4 GB block to read it; it is refused
 * as too large, quickly, before any block is read. */
static void test_huge_blocks(void)
{
    if (!GDALGetDriverByName("JP2OpenJPEG")) {
        g_test_skip("GDAL has no JP2OpenJPEG driver in this build");
        return;
    }
    char *opts[] = { (char *)"CODEC=J2K", NULL };
    g_autofree char *path = write_fixture("JP2OpenJPEG", "tiles.j2k", 9, 7, 1, GDT_Byte, opts);
    g_autofree guint8 *bytes = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(path, (char **)&bytes, &len, NULL));
    g_assert_cmpuint(len, >, 40);
    g_assert_cmpint(bytes[2], ==, 0xFF); /* SOC, then SIZ */
    g_assert_cmpint(bytes[3], ==, 0x51);
    static const guint8 xtsiz[4] = { 0x40, 0x00, 0x00, 0x09 }; /* XTsiz = 2^30 + 9 */
    memcpy(bytes + 24, xtsiz, 4);
    g_autofree char *huge = g_build_filename(tmpdir, "huge-tiles.j2k", NULL);
    g_assert_true(g_file_set_contents(huge, (const char *)bytes, (gssize)len, NULL));
    g_autoptr(GError) err = NULL;
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(ClImage) img = cl_image_load(huge, NULL, &err);
    g_assert_null(img);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_assert_nonnull(strstr(err->message, "stored in blocks of 1073741833 × 7 samples"));
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 10 * G_USEC_PER_SEC);
    g_clear_error(&err);
    /* the same file with its tiles as declared by the encoder reads */
    g_autoptr(ClImage) ok = cl_image_load(path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(ok->width, ==, 9);
}

/* A plain GeoTIFF is still the TIFF loader's. */
static void test_geotiff_stays_tiff(void)
{
    g_autofree char *path = write_fixture("GTiff", "plain.tif", 7, 5, 1, GDT_Int16, NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load(path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpint(img->format, ==, CL_IMAGE_FORMAT_TIFF);
    g_assert_cmpstr(cl_image_format_name(img->format), ==, "TIFF");
    g_assert_cmpint(img->geo->epsg, ==, 32633);
    g_assert_null(cl_image_get_meta(img, "GDALDriver"));
}

/* A VRT whose source is on the network is refused, and nothing is fetched: a listening loopback
 * socket (never accepting) would hold any connection GDAL made in its backlog. */
static void test_no_network(void)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(GSocket) sock =
        g_socket_new(G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &err);
    g_assert_no_error(err);
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) any = g_inet_socket_address_new(lo, 0);
    g_assert_true(g_socket_bind(sock, any, TRUE, &err));
    g_assert_true(g_socket_listen(sock, &err));
    g_autoptr(GSocketAddress) bound = g_socket_get_local_address(sock, &err);
    const guint16 port = g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(bound));
    g_socket_set_blocking(sock, FALSE);

    g_autofree char *path = g_build_filename(tmpdir, "remote.vrt", NULL);
    g_autofree char *vrt = g_strdup_printf(
        "<VRTDataset rasterXSize=\"4\" rasterYSize=\"4\">\n"
        " <VRTRasterBand dataType=\"Byte\" band=\"1\">\n"
        "  <SimpleSource><SourceFilename>/vsicurl/http://127.0.0.1:%u/x.tif</SourceFilename>"
        "<SourceBand>1</SourceBand></SimpleSource>\n"
        " </VRTRasterBand>\n</VRTDataset>\n",
        port);
    g_assert_true(g_file_set_contents(path, vrt, -1, NULL));
    g_autoptr(ClImage) img = cl_image_load(path, NULL, &err); /* pixels read: the source too */
    g_assert_null(img);
    g_assert_nonnull(err);
    g_test_message("remote VRT: %s", err->message);
    g_clear_error(&err);
    g_autoptr(GSocket) came = g_socket_accept(sock, NULL, &err);
    g_assert_null(came); /* nobody connected */
    g_assert_error(err, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK);
}

static void test_corrupt(void)
{
    g_autoptr(GError) err = NULL;
    /* an ENVI header that lies about the size of its data */
    g_autofree char *path = write_fixture("ENVI", "lying.envi", 7, 5, 2, GDT_Int16, NULL);
    g_assert_cmpint(truncate(path, 20), ==, 0);
    g_autoptr(ClImage) cut = cl_image_load(path, NULL, &err);
    g_assert_null(cut);
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(err->message, "lying.envi"));
    g_test_message("truncated ENVI: %s", err->message);
    g_clear_error(&err);

    /* garbage: not a format anyone reads */
    g_autofree char *junk = g_build_filename(tmpdir, "junk.bin", NULL);
    guint8 bytes[4096];
    GRand *r = g_rand_new_with_seed(7);
    for (gsize i = 0; i < sizeof bytes; i++)
        bytes[i] = (guint8)g_rand_int_range(r, 0x20, 0x7f);
    g_rand_free(r);
    g_assert_true(g_file_set_contents(junk, (const char *)bytes, sizeof bytes, NULL));
    g_autoptr(ClImage) none = cl_image_load(junk, NULL, &err);
    g_assert_null(none);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNKNOWN_FORMAT);
    g_assert_nonnull(strstr(err->message, "not an image format ChangeLens reads"));
    g_clear_error(&err);
    g_autoptr(ClImage) none2 = cl_image_load_data(bytes, sizeof bytes, "junk.bin", NULL, &err);
    g_assert_null(none2);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNKNOWN_FORMAT);
}

/* The mask and heat map on the input's grid: the same size, CRS WKT and transform, read back with
 * GDAL; values mapped from a reduced-scale image by nearest. */
static void check_same_grid(const char *out, const char *input)
{
    GDALDatasetH a = GDALOpen(out, GA_ReadOnly), b = GDALOpen(input, GA_ReadOnly);
    g_assert_nonnull(a);
    g_assert_nonnull(b);
    g_assert_cmpint(GDALGetRasterXSize(a), ==, GDALGetRasterXSize(b));
    g_assert_cmpint(GDALGetRasterYSize(a), ==, GDALGetRasterYSize(b));
    g_assert_cmpstr(GDALGetProjectionRef(a), ==, GDALGetProjectionRef(b));
    g_assert_cmpstr(GDALGetProjectionRef(a), !=, "");
    double ta[6], tb[6];
    g_assert_cmpint(GDALGetGeoTransform(a, ta), ==, CE_None);
    g_assert_cmpint(GDALGetGeoTransform(b, tb), ==, CE_None);
    for (int i = 0; i < 6; i++)
        g_assert_cmpfloat(ta[i], ==, tb[i]);
    GDALClose(a);
    GDALClose(b);
}

static void test_export_geotiff(void)
{
    /* a 200 × 100 input read at 1/4 scale: a 50 × 25 map goes back onto the 200 × 100 grid */
    g_autofree char *input = write_blocks("ENVI", "grid.envi", 200, 100, FALSE);
    float *heat = g_new(float, 50 * 25);
    for (int i = 0; i < 50 * 25; i++)
        heat[i] = (float)(i % 50) / 49.0f; /* 0 at the left edge, 1 at the right */
    g_autofree char *mask = g_build_filename(tmpdir, "mask.tif", NULL);
    g_autofree char *heatp = g_build_filename(tmpdir, "heat.tif", NULL);
    g_autoptr(GError) err = NULL;
    gboolean geo = FALSE;
    g_assert_true(cl_geo_write_geotiff(mask, input, heat, 50, 25, TRUE, 0.5, &geo, &err));
    g_assert_no_error(err);
    g_assert_true(geo);
    g_assert_true(cl_geo_write_geotiff(heatp, input, heat, 50, 25, FALSE, 0, NULL, &err));
    g_assert_no_error(err);
    check_same_grid(mask, input);
    check_same_grid(heatp, input);
    GDALDatasetH m = GDALOpen(mask, GA_ReadOnly), h = GDALOpen(heatp, GA_ReadOnly);
    g_assert_cmpint(GDALGetRasterDataType(GDALGetRasterBand(m, 1)), ==, GDT_Byte);
    g_assert_cmpint(GDALGetRasterDataType(GDALGetRasterBand(h, 1)), ==, GDT_Float32);
    float *mv = g_new(float, 200 * 100), *hv = g_new(float, 200 * 100);
    g_assert_cmpint(GDALRasterIO(GDALGetRasterBand(m, 1), GF_Read, 0, 0, 200, 100, mv, 200, 100,
                                 GDT_Float32, 0, 0),
                    ==, CE_None);
    g_assert_cmpint(GDALRasterIO(GDALGetRasterBand(h, 1), GF_Read, 0, 0, 200, 100, hv, 200, 100,
                                 GDT_Float32, 0, 0),
                    ==, CE_None);
    for (int y = 0; y < 100; y++)
        for (int x = 0; x < 200; x++) {
            float v = heat[(y / 4) * 50 + x / 4];
            g_assert_cmpfloat(hv[y * 200 + x], ==, v);
            g_assert_cmpfloat(mv[y * 200 + x], ==, v >= 0.5f ? 1 : 0);
        }
    GDALClose(m);
    GDALClose(h);
    g_free(mv);
    g_free(hv);
    g_free(heat);

    /* a grid that cannot be opened: an error, no file */
    g_autofree char *nowhere = g_build_filename(tmpdir, "nowhere.tif", NULL);
    float one = 1;
    g_assert_false(
        cl_geo_write_geotiff(nowhere, "/nonexistent/in.envi", &one, 1, 1, TRUE, 0.5, NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO);
    g_assert_false(g_file_test(nowhere, G_FILE_TEST_EXISTS));
}

/* A 3 × 3 square and a lone pixel on a 10 m UTM grid: two polygons of 900 and 100 m². */
static void test_export_regions(void)
{
    g_autofree char *input = write_blocks("ENVI", "grid2.envi", 12, 8, FALSE);
    float m[12 * 8] = { 0 };
    for (int y = 2; y < 5; y++)
        for (int x = 3; x < 6; x++)
            m[y * 12 + x] = 1;
    m[7 * 12 + 11] = 1;
    g_autofree char *mask = g_build_filename(tmpdir, "mask2.tif", NULL);
    g_autofree char *gpkg = g_build_filename(tmpdir, "regions.gpkg", NULL);
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_geo_write_geotiff(mask, input, m, 12, 8, TRUE, 0.5, NULL, &err));
    guint n = 0;
    g_assert_true(cl_geo_write_regions(gpkg, mask, &n, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(n, ==, 2);

    GDALDatasetH ds = GDALOpenEx(gpkg, GDAL_OF_VECTOR, NULL, NULL, NULL);
    g_assert_nonnull(ds);
    OGRLayerH layer = GDALDatasetGetLayerByName(ds, "changed_regions");
    g_assert_nonnull(layer);
    g_assert_cmpint(OGR_L_GetFeatureCount(layer, TRUE), ==, 2);
    OGRSpatialReferenceH s = OGR_L_GetSpatialRef(layer);
    g_assert_nonnull(s);
    g_assert_cmpstr(OSRGetAuthorityCode(s, NULL), ==, "32633");
    double areas[2] = { 0, 0 };
    OGRFeatureH f;
    int k = 0;
    OGR_L_ResetReading(layer);
    while ((f = OGR_L_GetNextFeature(layer)) != NULL) {
        g_assert_cmpint(k, <, 2);
        areas[k] = OGR_F_GetFieldAsDouble(f, OGR_F_GetFieldIndex(f, "area_m2"));
        OGREnvelope e;
        OGR_G_GetEnvelope(OGR_F_GetGeometryRef(f), &e);
        if (areas[k] > 500) {
            /* the square: columns 3..5, rows 2..4 of a grid from (500000, 4600000), 10 m */
            g_assert_cmpfloat(e.MinX, ==, 500030);
            g_assert_cmpfloat(e.MaxX, ==, 500060);
            g_assert_cmpfloat(e.MaxY, ==, 4599980);
            g_assert_cmpfloat(e.MinY, ==, 4599950);
        }
        OGR_F_Destroy(f);
        k++;
    }
    /* exact: the polygons' corners are whole metres */
    g_assert_cmpfloat(MAX(areas[0], areas[1]), ==, 900);
    g_assert_cmpfloat(MIN(areas[0], areas[1]), ==, 100);
    GDALClose(ds);
}

/* End to end: `info` on a GDAL-only file, and `describe --geotiff` writing its heat map, mask and
 * regions on the grid of the second image (ENVI, read by GDAL). */
static void test_cli(void)
{
    g_autofree char *before = write_blocks("GTiff", "cli-before.tif", 64, 48, FALSE);
    g_autofree char *after = write_blocks("ENVI", "cli-after.envi", 64, 48, FALSE);
    const char *info[] = { "info", "--json", after, NULL };
    g_autoptr(JsonNode) root = cl_fixture_cli_json(info);
    JsonObject *o = json_array_get_object_element(json_node_get_array(root), 0);
    g_assert_cmpstr(json_object_get_string_member(o, "format"), ==, "GDAL");
    JsonObject *geo = json_object_get_object_member(o, "geo");
    g_assert_cmpint(json_object_get_int_member(geo, "epsg"), ==, 32633);
    g_assert_nonnull(strstr(json_object_get_string_member(geo, "crs_wkt"), "UTM zone 33N"));
    JsonObject *md = json_object_get_object_member(o, "metadata");
    g_assert_true(g_str_has_prefix(json_object_get_string_member(md, "GDALDriver"), "ENVI"));

    g_autofree char *prefix = g_build_filename(tmpdir, "cli-out", NULL);
    const char *describe[] = { "describe", "--random-init",
                               "tiny",     "--device",
                               "cpu",      "--max-tokens",
                               "2",        "--geotiff",
                               prefix,     "--mask-threshold",
                               "0.25",     before,
                               after,      NULL };
    g_autofree char *err = NULL;
    g_assert_cmpint(cl_fixture_run_cli(describe, &err), ==, 0);
    g_test_message("%s", err);
    g_assert_nonnull(strstr(err, "at heat >= 0.25"));
    g_autofree char *heat = g_strdup_printf("%s-2-heat.tif", prefix);
    g_autofree char *mask = g_strdup_printf("%s-2-mask.tif", prefix);
    g_autofree char *gpkg = g_strdup_printf("%s-2-regions.gpkg", prefix);
    check_same_grid(heat, after);
    check_same_grid(mask, after);
    GDALDatasetH ds = GDALOpenEx(gpkg, GDAL_OF_VECTOR, NULL, NULL, NULL);
    g_assert_nonnull(ds);
    g_assert_nonnull(GDALDatasetGetLayerByName(ds, "changed_regions"));
    GDALClose(ds);

    /* --mask-threshold alone, or out of range: usage errors */
    const char *alone[] = { "describe", "--random-init", "tiny", "--mask-threshold",
                            "0.5",      before,          after,  NULL };
    g_assert_cmpint(cl_fixture_run_cli(alone, NULL), ==, 2);
    const char *range[] = { "describe",         "--random-init", "tiny", "--geotiff", prefix,
                            "--mask-threshold", "1.5",           before, after,       NULL };
    g_assert_cmpint(cl_fixture_run_cli(range, NULL), ==, 2);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    cl_gdal_init();
    CPLPushErrorHandler(CPLQuietErrorHandler); /* the fixtures' writers: no noise */
    tmpdir = cl_fixture_tmpdir("cl-test-gdal");
    g_test_add_func("/gdal/envi", test_envi);
    g_test_add_func("/gdal/jp2", test_jp2);
    g_test_add_func("/gdal/overview", test_overview);
    g_test_add_func("/gdal/decimated", test_decimated);
    g_test_add_func("/gdal/subdatasets", test_subdatasets);
    g_test_add_func("/gdal/vrt", test_vrt);
    g_test_add_func("/gdal/nitf", test_nitf);
    g_test_add_func("/gdal/hdf5", test_hdf5);
    g_test_add_func("/gdal/geotiff-stays-tiff", test_geotiff_stays_tiff);
    g_test_add_func("/gdal/corrupt", test_corrupt);
    g_test_add_func("/gdal/huge-blocks", test_huge_blocks);
    g_test_add_func("/gdal/no-network", test_no_network);
    g_test_add_func("/gdal/export/geotiff", test_export_geotiff);
    g_test_add_func("/gdal/export/regions", test_export_regions);
    g_test_add_func("/gdal/export/cli", test_cli);
    int rc = g_test_run();
    cl_fixture_rmdir(tmpdir);
    g_free(tmpdir);
    return rc;
}
