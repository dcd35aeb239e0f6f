/* gdal.c - the GDAL loader: every raster GDAL opens that the other loaders do not take (JPEG 2000,
 * NITF, ENVI, VRT, netCDF/HDF5 subdatasets, ...), and TIFFs over the pixel budget, read at an
 * overview or a decimated scale that fits. */
#include <gdal.h>
#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <cpl_vsi.h>
#include <ogr_srs_api.h>

#include <math.h>
#include <string.h>

#include "image/loaders.h"

void cl_gdal_init(void)
{
    static gsize once = 0;
    if (g_once_init_enter(&once)) {
        /* fully local (docs/DESIGN.md §9, item 12): a file (a VRT's source, a path the user
         * typed) never makes GDAL or PROJ reach the network — /vsicurl/ and the cloud handlers
         * built on it take no file, PROJ fetches no grid */
        CPLSetConfigOption("CPL_VSIL_CURL_ALLOWED_EXTENSIONS", ".changelens-no-network");
        CPLSetConfigOption("GDAL_HTTP_MAX_RETRY", "0");
        CPLSetConfigOption("PROJ_NETWORK", "OFF");
        OSRSetPROJEnableNetwork(FALSE);
        GDALAllRegister();
        g_once_init_leave(&once, 1);
    }
}

/* GDAL's message for the last failure on this thread (the error stack is per thread), or why. */
static const char *last_message(const char *fallback)
{
    const char *m = CPLGetLastErrorMsg();
    return m && *m ? m : fallback;
}

static void add_meta_printf(ClImage *img, const char *key, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);
static void add_meta_printf(ClImage *img, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *v = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    cl_image_add_meta(img, key, v);
}

/* Sample type: bits, container and kind. FALSE for complex samples (no single value per pixel). */
static gboolean sample_type(GDALRasterBandH band, ClImage *img)
{
    GDALDataType t = GDALGetRasterDataType(band);
    if (GDALDataTypeIsComplex(t))
        return FALSE;
    img->bits_allocated = img->bits = (guint)GDALGetDataTypeSizeBits(t);
    img->sample_format = GDALDataTypeIsFloating(t) ? CL_SAMPLE_FLOAT
                         : GDALDataTypeIsSigned(t) ? CL_SAMPLE_INT
                                                   : CL_SAMPLE_UINT;
    const char *pt = GDALGetMetadataItem(band, "PIXELTYPE", "IMAGE_STRUCTURE");
    if (t == GDT_Byte && pt && strcmp(pt, "SIGNEDBYTE") == 0)
        img->sample_format = CL_SAMPLE_INT;
    const char *nbits = GDALGetMetadataItem(band, "NBITS", "IMAGE_STRUCTURE");
    if (nbits) {
        int n = atoi(nbits);
        if (n > 0 && (guint)n < img->bits)
            img->bits = (guint)n;
    }
    return TRUE;
}

/* Layout from the bands' colour interpretation; a palette band is expanded to RGB(A). */
static void layout(GDALDatasetH ds, guint n_bands, ClImage *img, gboolean *palette)
{
    GDALColorInterp ci[4] = { GCI_Undefined, GCI_Undefined, GCI_Undefined, GCI_Undefined };
    for (guint b = 0; b < MIN(n_bands, 4u); b++)
        ci[b] = GDALGetRasterColorInterpretation(GDALGetRasterBand(ds, (int)b + 1));
    *palette = n_bands == 1 && ci[0] == GCI_PaletteIndex &&
               GDALGetRasterColorTable(GDALGetRasterBand(ds, 1)) != NULL;
    if (*palette) {
        img->layout = CL_LAYOUT_RGBA;
        img->channels = 4;
        img->photometric = g_strdup("palette");
        return;
    }
    img->channels = n_bands;
    if (n_bands == 1) {
        img->layout = CL_LAYOUT_GREY;
        img->photometric = g_strdup("grey");
    } else if (n_bands == 2 && ci[1] == GCI_AlphaBand) {
        img->layout = CL_LAYOUT_GREY_ALPHA;
        img->photometric = g_strdup("grey");
    } else if ((n_bands == 3 || n_bands == 4) && ci[0] == GCI_RedBand && ci[1] == GCI_GreenBand &&
               ci[2] == GCI_BlueBand && (n_bands == 3 || ci[3] == GCI_AlphaBand)) {
        img->layout = n_bands == 3 ? CL_LAYOUT_RGB : CL_LAYOUT_RGBA;
        img->photometric = g_strdup("rgb");
    } else {
        img->layout = CL_LAYOUT_BANDS;
        img->photometric = g_strdup("bands");
    }
}

/* CRS (EPSG code, name, WKT) and geotransform; nothing when the dataset has neither. */
static void read_geo(GDALDatasetH ds, ClImage *img, double sx, double sy)
{
    double t[6];
    gboolean has_t = GDALGetGeoTransform(ds, t) == CE_None;
    OGRSpatialReferenceH srs = GDALGetSpatialRef(ds);
    if (!has_t && !srs)
        return;
    ClGeoInfo *g = img->geo = g_new0(ClGeoInfo, 1);
    if (srs) {
        const char *auth = OSRGetAuthorityName(srs, NULL);
        const char *code = OSRGetAuthorityCode(srs, NULL);
        if (auth && code && g_ascii_strcasecmp(auth, "EPSG") == 0)
            g->epsg = atoi(code);
        if (!g->epsg) {
            /* a WKT without an authority: ask PROJ whether it is a known EPSG CRS */
            OGRSpatialReferenceH c = OSRClone(srs);
            if (OSRAutoIdentifyEPSG(c) == OGRERR_NONE) {
                auth = OSRGetAuthorityName(c, NULL);
                code = OSRGetAuthorityCode(c, NULL);
                if (auth && code && g_ascii_strcasecmp(auth, "EPSG") == 0)
                    g->epsg = atoi(code);
            }
            OSRDestroySpatialReference(c);
        }
        const char *name = OSRGetName(srs);
        if (name && *name && g_ascii_strcasecmp(name, "unnamed") != 0)
            g->crs_name = g_utf8_make_valid(name, -1);
        else if (g->epsg) {
            /* a CRS identified but not named (NITF's IGEOLO UTM corners): the EPSG entry's name */
            OGRSpatialReferenceH e = OSRNewSpatialReference(NULL);
            if (OSRImportFromEPSG(e, g->epsg) == OGRERR_NONE && OSRGetName(e))
                g->crs_name = g_utf8_make_valid(OSRGetName(e), -1);
            OSRDestroySpatialReference(e);
        }
        if (!g->crs_name && name && *name)
            g->crs_name = g_utf8_make_valid(name, -1);
        const char *wkt = GDALGetProjectionRef(ds);
        if (wkt && *wkt)
            g->crs_wkt = g_strdup(wkt);
    }
    const char *aop = GDALGetMetadataItem(ds, "AREA_OR_POINT", NULL);
    g->pixel_is_point = aop && g_ascii_strcasecmp(aop, "Point") == 0;
    if (has_t) {
        add_meta_printf(img, "GeoTransform", "%.15g %.15g %.15g %.15g %.15g %.15g", t[0] + 0.0,
                        t[1] + 0.0, t[2] + 0.0, t[3] + 0.0, t[4] + 0.0, t[5] + 0.0); /* no "-0" */
        /* read at a reduced scale: a pixel of the image covers sx × sy pixels of the raster */
        t[1] *= sx, t[2] *= sy, t[4] *= sx, t[5] *= sy;
        gboolean finite = TRUE;
        for (guint i = 0; i < 6; i++)
            finite = finite && isfinite(t[i]);
        if (finite) {
            g->has_transform = TRUE;
            memcpy(g->transform, t, sizeof t);
            g->origin[0] = t[0];
            g->origin[1] = t[3];
            g->pixel_size[0] = hypot(t[1], t[4]);
            g->pixel_size[1] = hypot(t[2], t[5]);
        }
    }
}

static void add_subdatasets(ClImage *img, char **sub)
{
    for (guint i = 0; sub && sub[i] && i < 1024; i++) {
        char *key = NULL;
        const char *v = CPLParseNameValue(sub[i], &key);
        if (key && v && g_str_has_suffix(key, "_NAME"))
            cl_image_add_meta(img, "Subdataset", v);
        CPLFree(key);
    }
}

static void read_metadata(GDALDatasetH ds, guint n_bands, ClImage *img)
{
    GDALDriverH drv = GDALGetDatasetDriver(ds);
    if (drv)
        add_meta_printf(img, "GDALDriver", "%s (%s)", GDALGetDriverShortName(drv),
                        GDALGetDriverLongName(drv));
    /* the dataset's own key=value metadata, then its subdatasets (netCDF, HDF5, ...) */
    char **md = GDALGetMetadata(ds, NULL);
    for (guint i = 0; md && md[i] && i < 512; i++) {
        char *key = NULL;
        const char *v = CPLParseNameValue(md[i], &key);
        if (key && v)
            cl_image_add_meta(img, key, v);
        CPLFree(key);
    }
    add_subdatasets(img, GDALGetMetadata(ds, "SUBDATASETS"));
    for (guint b = 1; b <= n_bands && b <= 1024; b++) {
        GDALRasterBandH band = GDALGetRasterBand(ds, (int)b);
        const char *d = GDALGetDescription(band);
        if (d && *d)
            add_meta_printf(img, "BandDescription", "band %u: %s", b, d);
        const char *unit = GDALGetRasterUnitType(band);
        if (unit && *unit)
            add_meta_printf(img, "Unit", "band %u: %s", b, unit);
    }
}

/* The scale the raster is read at: the full one when it fits the limits; else the largest
 * overview that fits (every band has it); else the smallest whole decimation that fits. */
typedef struct {
    guint width, height; /* what is read */
    int overview;        /* -1: the full raster (maybe decimated) */
} ReadScale;

static gboolean choose_scale(GDALDatasetH ds, guint w, guint h, guint channels,
                             const ClImageLimits *limits, ReadScale *rs, const char *shown,
                             GError **error)
{
    g_autoptr(GError) local = NULL;
    rs->width = w, rs->height = h, rs->overview = -1;
    if (cl_image_check_limits(limits, w, h, 1, channels, &local))
        return TRUE;
    if (!g_error_matches(local, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE) ||
        channels > limits->max_channels) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "%s: ", shown);
        return FALSE;
    }
    GDALRasterBandH b1 = GDALGetRasterBand(ds, 1);
    int n_ov = GDALGetOverviewCount(b1);
    guint64 best = 0;
    for (int i = 0; i < n_ov && i < 64; i++) {
        GDALRasterBandH ov = GDALGetOverview(b1, i);
        if (!ov)
            continue;
        int ow = GDALGetRasterBandXSize(ov), oh = GDALGetRasterBandYSize(ov);
        gboolean all = ow > 0 && oh > 0;
        for (int b = 2; all && b <= GDALGetRasterCount(ds); b++) {
            GDALRasterBandH bo = GDALGetOverview(GDALGetRasterBand(ds, b), i);
            all = bo && GDALGetRasterBandXSize(bo) == ow && GDALGetRasterBandYSize(bo) == oh;
        }
        if (!all || !cl_image_check_limits(limits, (guint)ow, (guint)oh, 1, channels, NULL))
            continue;
        if ((guint64)ow * (guint64)oh > best) {
            best = (guint64)ow * (guint64)oh;
            rs->width = (guint)ow, rs->height = (guint)oh, rs->overview = i;
        }
    }
    if (rs->overview >= 0)
        return TRUE;
    for (guint f = 2; f <= MAX(w, h); f++) {
        guint dw = (w + f - 1) / f, dh = (h + f - 1) / f;
        if (cl_image_check_limits(limits, dw, dh, 1, channels, NULL)) {
            rs->width = dw, rs->height = dh;
            return TRUE;
        }
    }
    g_propagate_prefixed_error(error, g_steal_pointer(&local), "%s: ", shown);
    return FALSE;
}

/* One band into plane (rs->width × rs->height floats): from the overview, or the full raster
 * decimated (nearest: a sample is a value of the file, never a blend). */
static gboolean read_band(GDALRasterBandH band, const ReadScale *rs, float *plane)
{
    GDALRasterBandH src = band;
    if (rs->overview >= 0)
        src = GDALGetOverview(band, rs->overview);
    if (!src)
        return FALSE;
    int sw = GDALGetRasterBandXSize(src), sh = GDALGetRasterBandYSize(src);
    GDALRasterIOExtraArg extra;
    INIT_RASTERIO_EXTRA_ARG(extra);
    extra.eResampleAlg = GRIORA_NearestNeighbour;
    return GDALRasterIOEx(src, GF_Read, 0, 0, sw, sh, plane, (int)rs->width, (int)rs->height,
                          GDT_Float32, 0, 0, &extra) == CE_None;
}

/* GDAL reads a block whole, whatever part of it is asked for: a file may declare blocks far larger
 * than its raster (a few bytes claiming 14 GB blocks were found by tests/fuzz/fuzz-gdal.c), so
 * a band's block may hold at most the pixel budget's samples (at least 2^24: a small budget
 * still reads ordinary strips and tiles). */
#define MIN_BLOCK_BUDGET ((guint64)1 << 24)
static gboolean blocks_fit(GDALRasterBandH band, const ReadScale *rs, guint b,
                           const ClImageLimits *limits, const char *shown, GError **error)
{
    GDALRasterBandH src = rs->overview >= 0 ? GDALGetOverview(band, rs->overview) : band;
    int bx = 0, by = 0;
    if (src)
        GDALGetBlockSize(src, &bx, &by);
    const guint64 samples = (guint64)MAX(bx, 0) * (guint64)MAX(by, 0);
    const guint64 most = MAX(limits->max_pixels, MIN_BLOCK_BUDGET);
    if (src && samples <= most)
        return TRUE;
    g_set_error(
        error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
        "%s: band %u is stored in blocks of %d × %d samples, more than the %" G_GUINT64_FORMAT
        " that a block read whole may take (the pixel budget)",
        shown, b + 1, bx, by, most);
    return FALSE;
}

static gboolean read_pixels(GDALDatasetH ds, ClImage *img, const ReadScale *rs, gboolean palette,
                            const ClImageLimits *limits, const char *shown, GError **error)
{
    if (!cl_image_alloc_frames(img, 1, error)) {
        g_prefix_error(error, "%s: ", shown);
        return FALSE;
    }
    ClFrame *f = g_ptr_array_index(img->frames, 0);
    gsize plane = (gsize)img->width * img->height;
    guint n_bands = (guint)GDALGetRasterCount(ds);
    for (guint b = 0; b < (palette ? 1 : n_bands); b++) {
        GDALRasterBandH band = GDALGetRasterBand(ds, (int)b + 1);
        if (!blocks_fit(band, rs, b, limits, shown, error))
            return FALSE;
        if (!read_band(band, rs, f->data + b * plane)) {
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                        "%s: band %u cannot be read: %s", shown, b + 1,
                        last_message("GDAL gave no reason"));
            return FALSE;
        }
    }
    if (palette) {
        /* indices -> RGBA from the colour table, in place from the last plane back */
        GDALColorTableH ct = GDALGetRasterColorTable(GDALGetRasterBand(ds, 1));
        int n = GDALGetColorEntryCount(ct);
        float *idx = f->data;
        for (gsize i = plane; i-- > 0;) {
            int k = (int)idx[i];
            GDALColorEntry e = { 0, 0, 0, 0 };
            if (k >= 0 && k < n)
                GDALGetColorEntryAsRGB(ct, k, &e);
            f->data[i] = e.c1;
            f->data[plane + i] = e.c2;
            f->data[2 * plane + i] = e.c3;
            f->data[3 * plane + i] = e.c4;
        }
        img->bits = img->bits_allocated = 8;
        img->sample_format = CL_SAMPLE_UINT;
    }
    return TRUE;
}

/* Nodata values become NaN (the display shows them transparent, statistics skip them: the
 * convention of float TIFF nodata); scale/offset becomes the frame's rescale when every band
 * shares it, else each band is rescaled into its values. */
static void values(GDALDatasetH ds, ClImage *img, gboolean palette)
{
    guint n_bands = (guint)GDALGetRasterCount(ds);
    gsize plane = (gsize)img->width * img->height;
    ClFrame *f = img->frames->len ? g_ptr_array_index(img->frames, 0) : NULL;
    gboolean shared = TRUE;
    double s0 = 1, o0 = 0;
    for (guint b = 0; b < n_bands && b < 1024; b++) {
        GDALRasterBandH band = GDALGetRasterBand(ds, (int)b + 1);
        int has = 0;
        double nd = GDALGetRasterNoDataValue(band, &has);
        if (has) {
            add_meta_printf(img, "NoData", "band %u: %.17g (read as no data: NaN)", b + 1, nd);
            if (f && f->data && !palette) {
                float *p = f->data + b * plane;
                float ndf = (float)nd;
                for (gsize i = 0; i < plane; i++)
                    if (p[i] == ndf || (isnan(nd) && isnan(p[i])))
                        p[i] = NAN;
            }
        }
        int hs = 0, ho = 0;
        double s = GDALGetRasterScale(band, &hs), o = GDALGetRasterOffset(band, &ho);
        if (!hs || !isfinite(s) || s == 0)
            s = 1;
        if (!ho || !isfinite(o))
            o = 0;
        if (s != 1 || o != 0)
            add_meta_printf(img, "ScaleOffset", "band %u: value = stored × %.17g + %.17g", b + 1, s,
                            o);
        if (b == 0)
            s0 = s, o0 = o;
        else if (s != s0 || o != o0)
            shared = FALSE;
    }
    if (!f || palette)
        return;
    if (shared) {
        f->rescale_slope = s0;
        f->rescale_intercept = o0;
        return;
    }
    /* bands with their own scales: the values themselves in physical units */
    for (guint b = 0; b < n_bands && f->data; b++) {
        GDALRasterBandH band = GDALGetRasterBand(ds, (int)b + 1);
        int hs = 0, ho = 0;
        double s = GDALGetRasterScale(band, &hs), o = GDALGetRasterOffset(band, &ho);
        s = hs && isfinite(s) && s != 0 ? s : 1;
        o = ho && isfinite(o) ? o : 0;
        float *p = f->data + b * plane;
        for (gsize i = 0; i < plane; i++)
            p[i] = (float)(p[i] * s + o);
    }
    img->sample_format = CL_SAMPLE_FLOAT;
    img->bits = img->bits_allocated = 32;
    cl_image_add_meta(img, "ScaleOffset", "bands differ: applied to the values");
}

static ClImage *load_dataset(GDALDatasetH ds, const char *shown, const ClImageLimits *limits,
                             GError **error)
{
    int rw = GDALGetRasterXSize(ds), rh = GDALGetRasterYSize(ds), nb = GDALGetRasterCount(ds);
    if (nb == 0 && GDALGetMetadata(ds, "SUBDATASETS")) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID,
                    "%s: a container of subdatasets; open one of them", shown);
        return NULL;
    }
    if (rw <= 0 || rh <= 0 || nb <= 0) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                    "%s: GDAL raster without pixels (%d × %d, %d bands)", shown, rw, rh, nb);
        return NULL;
    }
    guint w = (guint)rw, h = (guint)rh, n_bands = (guint)nb;
    guint64 need = 0, have = 0;
    if (cl_gdal_raw_size(ds, &need, &have) && have < need) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                    "%s: truncated: %u × %u × %u samples need %" G_GUINT64_FORMAT
                    " bytes of data, the file has %" G_GUINT64_FORMAT,
                    shown, w, h, n_bands, need, have);
        return NULL;
    }
    if (n_bands > limits->max_channels) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                    "%s: raster has %u bands; the limit is %u", shown, n_bands,
                    limits->max_channels);
        return NULL;
    }
    g_autoptr(ClImage) img = cl_image_new(CL_IMAGE_FORMAT_GDAL);
    GDALRasterBandH b1 = GDALGetRasterBand(ds, 1);
    if (!sample_type(b1, img)) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNSUPPORTED,
                    "%s: complex samples (%s) are not supported", shown,
                    GDALGetDataTypeName(GDALGetRasterDataType(b1)));
        return NULL;
    }
    for (guint b = 2; b <= n_bands; b++) {
        GDALRasterBandH band = GDALGetRasterBand(ds, (int)b);
        if (GDALGetRasterDataType(band) != GDALGetRasterDataType(b1)) {
            /* the widest type describes them all: values are floats here anyway */
            img->sample_format = CL_SAMPLE_FLOAT;
            img->bits = img->bits_allocated = 32;
            break;
        }
    }
    gboolean palette = FALSE;
    layout(ds, n_bands, img, &palette);

    ReadScale rs;
    if (!choose_scale(ds, w, h, img->channels, limits, &rs, shown, error))
        return NULL;
    img->width = rs.width, img->height = rs.height;
    read_metadata(ds, n_bands, img);
    if (rs.width != w || rs.height != h) {
        double f = (double)w / rs.width;
        g_autofree char *how = rs.overview >= 0
                                   ? g_strdup_printf("GDAL overview %d", rs.overview + 1)
                                   : g_strdup("every sample taken from the nearest raster pixel");
        add_meta_printf(img, "Resolution",
                        "read at 1/%.3g scale: the full raster is %u × %u (%s; the pixel budget "
                        "is %" G_GUINT64_FORMAT " pixels)",
                        f, w, h, how, limits->max_pixels);
    }
    read_geo(ds, img, (double)w / rs.width, (double)h / rs.height);

    if (limits->header_only) {
        /* what the file says, no pixels: `info` without --stats */
        ClFrame *f = g_new0(ClFrame, 1);
        f->rescale_slope = 1.0;
        g_ptr_array_add(img->frames, f);
    } else if (!read_pixels(ds, img, &rs, palette, limits, shown, error)) {
        return NULL;
    }
    values(ds, img, palette);
    return g_steal_pointer(&img);
}

/* The dataset name handed to GDAL for path: the path itself, or for "FILE:SUB" where FILE is a
 * file whose subdatasets include one named SUB (or numbered SUB, from 1), that subdataset's name.
 * A bare container opens its first subdataset. */
static GDALDatasetH open_dataset(const char *path, const char *shown, char **opened,
                                 char ***container_subs, GError **error)
{
    const unsigned flags = GDAL_OF_RASTER | GDAL_OF_READONLY | GDAL_OF_VERBOSE_ERROR;
    CPLErrorReset();
    GDALDatasetH ds = GDALOpenEx(path, flags, NULL, NULL, NULL);
    g_autofree char *sub_name = NULL;
    if (!ds) {
        const char *colon = strrchr(path, ':');
        if (colon && colon != path && colon[1]) {
            g_autofree char *file = g_strndup(path, (gsize)(colon - path));
            const char *want = colon + 1;
            if (g_file_test(file, G_FILE_TEST_IS_REGULAR)) {
                GDALDatasetH c = GDALOpenEx(file, flags, NULL, NULL, NULL);
                char **sub = c ? GDALGetMetadata(c, "SUBDATASETS") : NULL;
                *container_subs = CSLDuplicate(sub);
                int k = atoi(want);
                for (guint i = 0; sub && sub[i]; i++) {
                    char *key = NULL;
                    const char *v = CPLParseNameValue(sub[i], &key);
                    gboolean is_name = key && v && g_str_has_suffix(key, "_NAME");
                    if (is_name) {
                        /* SUBDATASET_<k>_NAME=DRIVER:"file":variable */
                        int n = atoi(key + strlen("SUBDATASET_"));
                        const char *last = strrchr(v, ':');
                        const char *var = last ? last + 1 : v;
                        while (*var == '/')
                            var++;
                        const char *w = want;
                        while (*w == '/')
                            w++;
                        /* an HDF5 dataset by its path in the file ("scene/red") or its own name
                         * ("red") */
                        const char *base = strrchr(var, '/');
                        if ((k > 0 && n == k) || strcmp(var, w) == 0 ||
                            (base && !strchr(w, '/') && strcmp(base + 1, w) == 0))
                            sub_name = g_strdup(v);
                    }
                    CPLFree(key);
                    if (sub_name)
                        break;
                }
                if (c)
                    GDALClose(c);
                if (!sub_name) {
                    g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO,
                                "%s: %s has no subdataset '%s'", shown, file, want);
                    return NULL;
                }
                ds = GDALOpenEx(sub_name, flags, NULL, NULL, NULL);
            }
        }
    }
    if (!ds) {
        g_autofree char *why = g_strdup(last_message("GDAL does not recognise it"));
        GDALDriverH drv = GDALIdentifyDriverEx(path, GDAL_OF_RASTER, NULL, NULL);
        if (drv) {
            /* its driver knows the signature, but the file is damaged */
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                        "%s: damaged or unreadable %s file (%s): %s", shown,
                        GDALGetDriverShortName(drv), GDALGetDriverLongName(drv), why);
            return NULL;
        }
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNKNOWN_FORMAT,
                    "%s: not an image format ChangeLens reads (PNG, TIFF, DICOM, JPEG, WebP, "
                    "BMP, GIF, or a raster GDAL opens): %s",
                    shown, why);
        return NULL;
    }
    if (GDALGetRasterCount(ds) == 0) {
        char **sub = GDALGetMetadata(ds, "SUBDATASETS");
        const char *first = sub ? CSLFetchNameValue(sub, "SUBDATASET_1_NAME") : NULL;
        if (first) {
            g_autofree char *name = g_strdup(first);
            *container_subs = CSLDuplicate(sub);
            GDALClose(ds);
            ds = GDALOpenEx(name, flags, NULL, NULL, NULL);
            if (!ds) {
                g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                            "%s: its first subdataset %s cannot be opened: %s", shown, name,
                            last_message("no reason given"));
                return NULL;
            }
            sub_name = g_steal_pointer(&name);
        }
    }
    *opened = g_steal_pointer(&sub_name);
    return ds;
}

ClImage *cl_image_load_gdal(const char *path, const ClImageLimits *limits, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    ClImageLimits def;
    if (!limits) {
        cl_image_limits_init(&def);
        limits = &def;
    }
    cl_gdal_init();
    CPLPushErrorHandler(CPLQuietErrorHandler);
    g_autofree char *sub = NULL;
    char **subs = NULL;
    GDALDatasetH ds = open_dataset(path, path, &sub, &subs, error);
    ClImage *img = NULL;
    if (ds) {
        img = load_dataset(ds, path, limits, error);
        if (img && sub) {
            /* the container's list, to choose another as FILE:NAME or FILE:N */
            add_subdatasets(img, subs);
            cl_image_add_meta(img, "SubdatasetOpened", sub);
        }
        GDALClose(ds);
    }
    CSLDestroy(subs);
    CPLPopErrorHandler();
    if (img && !img->path)
        img->path = g_strdup(path);
    return img;
}

ClImage *cl_image_load_gdal_data(const guint8 *data, gsize len, const char *name,
                                 const ClImageLimits *limits, GError **error)
{
    static gint counter = 0;
    const char *shown = name ? name : "image";
    cl_gdal_init();
    g_autofree char *base = name ? g_path_get_basename(name) : g_strdup("image");
    g_autofree char *mem =
        g_strdup_printf("/vsimem/changelens-%d/%s", g_atomic_int_add(&counter, 1), base);
    VSILFILE *fp = VSIFileFromMemBuffer(mem, (GByte *)data, (vsi_l_offset)len, FALSE);
    if (!fp) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO, "%s: cannot hand the data to GDAL",
                    shown);
        return NULL;
    }
    VSIFCloseL(fp);
    CPLPushErrorHandler(CPLQuietErrorHandler);
    g_autofree char *sub = NULL;
    char **subs = NULL;
    GDALDatasetH ds = open_dataset(mem, shown, &sub, &subs, error);
    CSLDestroy(subs);
    ClImage *img = NULL;
    if (ds) {
        img = load_dataset(ds, shown, limits, error);
        GDALClose(ds);
    }
    CPLPopErrorHandler();
    VSIUnlink(mem);
    return img;
}
