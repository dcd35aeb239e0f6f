/* fuzz-gdal.c - libFuzzer harness for the GDAL loader (core/image/gdal.c) through
 * cl_image_load_gdal_data(): the input's first byte picks the name GDAL is shown (the extension
 * some drivers go by), the rest is the file. What is fuzzed is ours — the dataset's size, bands,
 * types, nodata, scale/offset, CRS, geotransform and subdatasets turned into a ClImage within
 * the limits — with GDAL's drivers in front (NITF, JPEG 2000, netCDF, HDF5, VRT, ENVI's one-file
 * cousins, GeoTIFF).
 * CL_FUZZ_WRITE_SEEDS=DIR writes seeds (small rasters written with GDAL's API) and exits. */
#include <gdal.h>
#include <cpl_conv.h>
#include <cpl_vsi.h>
#include <ogr_srs_api.h>
#include <stdint.h>
#include <string.h>

#include <glib/gstdio.h>

#include "fuzz-common.h"
#include "image/loaders.h"

static const char *const names[] = { "fuzz.ntf", "fuzz.jp2", "fuzz.nc",  "fuzz.h5",
                                     "fuzz.vrt", "fuzz.tif", "fuzz.img", "fuzz.bin" };
#define N_NAMES ((int)G_N_ELEMENTS(names))

/* a small Int16 raster of 2 bands with nodata, scale/offset, UTM grid, in DRIVER's format */
static void write_seed(const char *dir, int k, const char *driver, char **options)
{
    GDALDriverH drv = GDALGetDriverByName(driver);
    if (!drv)
        return;
    GDALDatasetH mem = GDALCreate(GDALGetDriverByName("MEM"), "", 9, 7, 2, GDT_Int16, NULL);
    double t[6] = { 500000, 10, 0, 4600000, 0, -10 };
    GDALSetGeoTransform(mem, t);
    OGRSpatialReferenceH s = OSRNewSpatialReference(NULL);
    OSRImportFromEPSG(s, 32633);
    GDALSetSpatialRef(mem, s);
    OSRDestroySpatialReference(s);
    gint16 v[63];
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < 63; i++)
            v[i] = (gint16)(b * 100 + i - 20);
        GDALRasterBandH band = GDALGetRasterBand(mem, b + 1);
        if (GDALRasterIO(band, GF_Write, 0, 0, 9, 7, v, 9, 7, GDT_Int16, 0, 0) != CE_None)
            return;
        GDALSetRasterNoDataValue(band, -20);
        GDALSetRasterScale(band, 0.5);
        GDALSetRasterOffset(band, 3);
    }
    const char *vsi = "/vsimem/seed";
    GDALDatasetH out = GDALCreateCopy(drv, vsi, mem, FALSE, options, NULL, NULL);
    GDALClose(mem);
    if (!out)
        return;
    GDALClose(out);
    vsi_l_offset len = 0;
    GByte *bytes = VSIGetMemFileBuffer(vsi, &len, FALSE);
    if (bytes && len > 0) {
        g_autofree guint8 *seed = g_malloc(len + 1);
        seed[0] = (guint8)k;
        memcpy(seed + 1, bytes, len);
        g_autofree char *p = g_strdup_printf("%s/%s.gdalseed", dir, driver);
        g_file_set_contents(p, (const char *)seed, (gssize)len + 1, NULL);
    }
    VSIUnlink(vsi);
}

static void write_seeds(const char *dir)
{
    g_mkdir_with_parents(dir, 0755);
    cl_gdal_init();
    write_seed(dir, 0, "NITF", NULL);
    write_seed(dir, 1, "JP2OpenJPEG", NULL);
    write_seed(dir, 5, "GTiff", NULL);
    write_seed(dir, 6, "HFA", NULL);
    /* a VRT of one band read from nowhere, and one with a function of its own */
    static const char vrt[] =
        "<VRTDataset rasterXSize=\"4\" rasterYSize=\"3\">\n"
        " <SRS>EPSG:4326</SRS><GeoTransform>10, 0.1, 0, 50, 0, -0.1</GeoTransform>\n"
        " <VRTRasterBand dataType=\"Float32\" band=\"1\"><NoDataValue>-1</NoDataValue>\n"
        "  <Offset>2</Offset><Scale>3</Scale><Description>b</Description>\n"
        " </VRTRasterBand>\n</VRTDataset>\n";
    g_autofree char *p = g_strdup_printf("%s/vrt.gdalseed", dir);
    g_autofree char *v = g_strdup_printf("%c%s", 4, vrt);
    g_file_set_contents(p, v, -1, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gboolean seeded;
    if (!seeded) {
        seeded = TRUE;
        const char *dir = g_getenv("CL_FUZZ_WRITE_SEEDS");
        if (dir && *dir) {
            write_seeds(dir);
            exit(0);
        }
        /* GDAL never reaches out of the process from a fuzzed file (VRT sources, /vsicurl/), and
         * its block cache stays small (its default is 5 % of the machine's memory) */
        CPLSetConfigOption("GDAL_HTTP_TIMEOUT", "1");
        CPLSetConfigOption("CPL_VSIL_CURL_ALLOWED_EXTENSIONS", "none");
        CPLSetConfigOption("GDAL_CACHEMAX", "32");
    }
    if (size < 2)
        return 0;
    ClImageLimits limits;
    cl_fuzz_setup(&limits, 16, 4);
    GError *error = NULL;
    ClImage *img =
        cl_image_load_gdal_data(data + 1, size - 1, names[data[0] % N_NAMES], &limits, &error);
    if (img)
        g_assert(img->format == CL_IMAGE_FORMAT_GDAL);
    cl_fuzz_finish(img, error, &limits);
    return 0;
}
