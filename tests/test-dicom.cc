/* test-dicom.cc - DICOM loader tests: every fixture read back value by value and corrupted, then
 * metadata, windows, VOI LUTs, spacing, per-frame rescale, limits and refusals. */
#include <dcmtk/config/osconfig.h>

#include <dcmtk/dcmdata/dctk.h>
#include <dcmtk/dcmdata/dcpxitem.h>

#include <glib/gstdio.h>
#include <string.h>

#include <functional>

#include "fixtures.h"
#include "image/loaders.h" /* cl_image_dicom_codecs */

static char *tmpdir;
static GPtrArray *fixtures; /* ClFixture* */

static const ClFixture *fixture(const char *file)
{
    for (guint i = 0; i < fixtures->len; i++) {
        const ClFixture *f = (const ClFixture *)g_ptr_array_index(fixtures, i);
        g_autofree char *base = g_path_get_basename(f->path);
        if (strcmp(base, file) == 0)
            return f;
    }
    g_error("no fixture %s", file);
    return NULL;
}

static ClImage *load_ok(const char *path)
{
    g_autoptr(GError) err = NULL;
    ClImage *img = cl_image_load(path, NULL, &err);
    g_assert_no_error(err);
    g_assert_nonnull(img);
    return img;
}

static ClImage *load_fixture(const char *file)
{
    return load_ok(fixture(file)->path);
}

/* Loads path and expects a refusal with code and a message containing each of the words. */
static void expect_error(const char *path, ClImageError code,
                         std::initializer_list<const char *> words)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load(path, NULL, &err);
    g_assert_null(img);
    g_assert_nonnull(err);
    if (err->domain != CL_IMAGE_ERROR || err->code != (int)code)
        g_error("%s: expected error code %d, got %d: %s", path, code, err->code, err->message);
    g_test_message("%s", err->message);
    g_assert_nonnull(strstr(err->message, path)); /* the message names the file */
    for (const char *w : words)
        if (!strstr(err->message, w))
            g_error("%s: error '%s' does not mention '%s'", path, err->message, w);
}

static void test_fixture(gconstpointer data)
{
    const ClFixture *f = (const ClFixture *)data;
    g_autoptr(GError) err = NULL;
    if (!cl_fixture_load_and_check(f, &err))
        g_error("%s", err->message);
    guint tried = cl_fixture_corruption_sweep(f);
    g_assert_cmpuint(tried, >=, 300);
}

/* ---- files written by the tests themselves for the refusal cases ---- */

typedef std::function<void(DcmDataset *)> Edit;

/* A small MONOCHROME2 16-bit image (rows × cols × frames), edited before writing. */
static char *write_grey(const char *name, guint rows, guint cols, guint frames, size_t n_words,
                        E_TransferSyntax xfer, const Edit &edit,
                        E_FileWriteMode mode = EWM_createNewMeta,
                        const std::function<void(DcmMetaInfo *)> &meta_edit = {})
{
    DcmFileFormat ff;
    DcmDataset *ds = ff.getDataset();
    ds->putAndInsertString(DCM_SOPClassUID, UID_SecondaryCaptureImageStorage);
    ds->putAndInsertString(DCM_SOPInstanceUID, "2.25.99001");
    ds->putAndInsertString(DCM_Modality, "OT");
    ds->putAndInsertUint16(DCM_Rows, (Uint16)rows);
    ds->putAndInsertUint16(DCM_Columns, (Uint16)cols);
    ds->putAndInsertUint16(DCM_SamplesPerPixel, 1);
    ds->putAndInsertString(DCM_PhotometricInterpretation, "MONOCHROME2");
    ds->putAndInsertUint16(DCM_BitsAllocated, 16);
    ds->putAndInsertUint16(DCM_BitsStored, 16);
    ds->putAndInsertUint16(DCM_HighBit, 15);
    ds->putAndInsertUint16(DCM_PixelRepresentation, 0);
    if (frames > 1) {
        g_autofree char *nf = g_strdup_printf("%u", frames);
        ds->putAndInsertString(DCM_NumberOfFrames, nf);
    }
    if (n_words) {
        std::vector<Uint16> w(n_words);
        for (size_t i = 0; i < n_words; i++)
            w[i] = (Uint16)(i * 7);
        ds->putAndInsertUint16Array(DCM_PixelData, w.data(), (unsigned long)n_words);
    }
    if (edit)
        edit(ds);
    if (meta_edit)
        meta_edit(ff.getMetaInfo());
    char *path = g_build_filename(tmpdir, name, NULL);
    OFCondition c =
        ff.saveFile(path, xfer, EET_ExplicitLength, EGL_recalcGL, EPD_noChange, 0, 0, mode);
    if (c.bad())
        g_error("cannot write %s: %s", path, c.text());
    return path;
}

/* Replaces Pixel Data with an encapsulated sequence holding one fragment of bytes, recorded as
 * already being in syntax xfer (so that DCMTK writes it without an encoder). */
static void encapsulate(DcmDataset *ds, E_TransferSyntax xfer, const std::vector<Uint8> &bytes)
{
    ds->findAndDeleteElement(DCM_PixelData);
    DcmPixelSequence *seq = new DcmPixelSequence(DcmTag(DCM_PixelData, EVR_OB));
    seq->insert(new DcmPixelItem(DcmTag(DCM_Item, EVR_OB)));
    DcmPixelItem *frag = new DcmPixelItem(DcmTag(DCM_Item, EVR_OB));
    frag->putUint8Array(bytes.data(), (unsigned long)bytes.size());
    seq->insert(frag);
    DcmPixelData *pd = new DcmPixelData(DCM_PixelData);
    pd->putOriginalRepresentation(xfer, NULL, seq);
    ds->insert(pd, OFTrue);
}

/* ---- metadata ---- */

static void test_metadata(void)
{
    g_autoptr(ClImage) img = load_fixture("dicom-mono2-u16-le.dcm");
    /* ISO_IR 100 (Latin-1) in the file, UTF-8 in memory */
    g_assert_cmpstr(img->patient_name, ==, "Müller^Jürgen");
    g_assert_cmpstr(cl_image_get_meta(img, "PatientName"), ==, "Müller^Jürgen");
    g_assert_cmpstr(img->patient_id, ==, "CL-0001");
    g_assert_cmpstr(img->study_uid, ==, "2.25.20001");
    g_assert_cmpstr(img->series_uid, ==, "2.25.30001");
    g_assert_cmpstr(img->sop_instance_uid, ==, "2.25.10001");
    g_assert_cmpstr(img->modality, ==, "DX");
    g_assert_cmpstr(img->study_datetime, ==, "20240131090000");
    g_assert_cmpstr(img->acquisition_datetime, ==, "20240131093015.5");
    g_assert_cmpint(img->instance_number, ==, 7);
    g_assert_cmpstr(img->transfer_syntax_uid, ==, "1.2.840.10008.1.2.1");
    g_assert_cmpstr(img->transfer_syntax, ==, "Little Endian Explicit");
    g_assert_cmpuint(img->bits, ==, 16);
    g_assert_cmpuint(img->bits_allocated, ==, 16);
    g_assert_null(img->rescale_type);

    static const struct {
        const char *key, *value;
    } meta[] = {
        { "PatientID", "CL-0001" },
        { "PatientBirthDate", "19700101" },
        { "PatientSex", "F" },
        { "StudyDescription", "Chest PA" },
        { "SeriesDescription", "Fixture series" },
        { "BodyPartExamined", "CHEST" },
        { "ViewPosition", "PA" },
        { "Manufacturer", "ChangeLens Fixtures" },
        { "InstitutionName", "Test Hospital" },
        { "AccessionNumber", "ACC123" },
        { "StudyDate", "20240131" },
        { "SeriesNumber", "3" },
        { "InstanceNumber", "7" },
        { "SOPClassUID", UID_DigitalXRayImageStorageForPresentation },
        { "PixelSpacingSource", "PixelSpacing" },
        { "TransferSyntaxUID", "1.2.840.10008.1.2.1" },
        { "SpecificCharacterSet", "ISO_IR 100" },
        { "CharacterSetConversion", "ISO_IR 100 converted to UTF-8" },
    };
    for (const auto &m : meta)
        if (g_strcmp0(cl_image_get_meta(img, m.key), m.value) != 0)
            g_error("metadata %s is '%s', expected '%s'", m.key,
                    cl_image_get_meta(img, m.key) ? cl_image_get_meta(img, m.key) : "(none)",
                    m.value);
    g_assert_nonnull(strstr(cl_image_get_meta(img, "SOPClassName"), "Presentation"));
    for (guint i = 0; i < img->metadata->len; i++) {
        const ClMetaEntry *e = (const ClMetaEntry *)g_ptr_array_index(img->metadata, i);
        g_assert_true(g_utf8_validate(e->value, -1, NULL));
    }

    g_assert_cmpuint(img->windows->len, ==, 2);
    const ClWindowPreset *w0 = &g_array_index(img->windows, ClWindowPreset, 0);
    const ClWindowPreset *w1 = &g_array_index(img->windows, ClWindowPreset, 1);
    g_assert_cmpfloat(w0->center, ==, 32768);
    g_assert_cmpfloat(w0->width, ==, 65536);
    g_assert_cmpstr(w0->explanation, ==, "FULL");
    g_assert_cmpfloat(w1->center, ==, 1200);
    g_assert_cmpfloat(w1->width, ==, 800);
    g_assert_cmpstr(w1->explanation, ==, "NARROW");

    g_assert_true(img->has_pixel_spacing);
    g_assert_cmpfloat_with_epsilon(img->pixel_spacing[0], 0.139, 1e-12);
    g_assert_cmpfloat_with_epsilon(img->pixel_spacing[1], 0.14, 1e-12);
    g_assert_cmpuint(img->voi_luts->len, ==, 0);
}

/* Attributes are the data set's own: a Patient's Name (or a Photometric Interpretation) nested
 * in a sequence item belongs to another image and must not win over, or stand in for, the
 * top-level one. DCMTK sorts by tag, so ReferencedImageSequence (0008,1140) comes first. */
static void nest_other_image(DcmDataset *ds)
{
    DcmItem *ref = NULL;
    g_assert_true(ds->findOrCreateSequenceItem(DCM_ReferencedImageSequence, ref, -2).good());
    ref->putAndInsertString(DCM_ReferencedSOPClassUID, UID_SecondaryCaptureImageStorage);
    ref->putAndInsertString(DCM_ReferencedSOPInstanceUID, "2.25.99002");
    ref->putAndInsertString(DCM_PatientName, "Nested^Wrong");
    ref->putAndInsertString(DCM_PatientID, "NESTED-ID");
    ref->putAndInsertString(DCM_Modality, "MR");
    ref->putAndInsertString(DCM_PhotometricInterpretation, "MONOCHROME1");
}

static void test_top_level_attributes(void)
{
    g_autofree char *both =
        write_grey("nested-name.dcm", 4, 4, 1, 16, EXS_LittleEndianExplicit, [](DcmDataset *ds) {
            ds->putAndInsertString(DCM_PatientName, "Top^Level");
            ds->putAndInsertString(DCM_PatientID, "TOP-ID");
            nest_other_image(ds);
        });
    g_autoptr(ClImage) img = load_ok(both);
    g_assert_cmpstr(img->patient_name, ==, "Top^Level");
    g_assert_cmpstr(cl_image_get_meta(img, "PatientName"), ==, "Top^Level");
    g_assert_cmpstr(img->patient_id, ==, "TOP-ID");
    g_assert_cmpstr(img->modality, ==, "OT");
    g_assert_cmpstr(img->photometric, ==, "MONOCHROME2");

    /* only the nested one: the image has no patient's name */
    g_autofree char *nested_only =
        write_grey("nested-name-only.dcm", 4, 4, 1, 16, EXS_LittleEndianExplicit, nest_other_image);
    g_autoptr(ClImage) img2 = load_ok(nested_only);
    g_assert_null(img2->patient_name);
    g_assert_null(img2->patient_id);
    g_assert_null(cl_image_get_meta(img2, "PatientName"));
    g_assert_cmpstr(img2->photometric, ==, "MONOCHROME2");
}

/* A dual-personality file (PS3.10 §7.1): the 128-byte preamble holds a complete little TIFF
 * (1 × 1, 8-bit), the DICOM file follows. It is read as the DICOM file it also is. */
static void write_tiff_preamble(guint8 *p)
{
    memset(p, 0, 128);
    memcpy(p, "II*\0", 4);
    p[4] = 8; /* first IFD at offset 8 */
    static const guint16 entries[8][3] = {
        /* tag, type (3 SHORT, 4 LONG), value */
        { 256, 3, 1 }, { 257, 3, 1 },   { 258, 3, 8 }, { 259, 3, 1 },
        { 262, 3, 1 }, { 273, 4, 110 }, { 278, 3, 1 }, { 279, 4, 1 },
    };
    guint8 *q = p + 8;
    q[0] = 8; /* entries */
    q += 2;
    for (const auto &e : entries) {
        q[0] = (guint8)(e[0] & 0xFF);
        q[1] = (guint8)(e[0] >> 8);
        q[2] = (guint8)e[1];
        q[4] = 1; /* count */
        q[8] = (guint8)(e[2] & 0xFF);
        q[9] = (guint8)(e[2] >> 8);
        q += 12;
    }
    /* next IFD offset 0 (4 bytes), then the one pixel at 110 */
    p[110] = 0x5A;
}

static void test_dual_personality(void)
{
    g_autofree char *plain = write_grey("dual-src.dcm", 6, 5, 1, 30, EXS_LittleEndianExplicit, {});
    g_autofree char *bytes = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(plain, &bytes, &len, NULL));
    g_assert_cmpuint(len, >, 132);
    write_tiff_preamble((guint8 *)bytes);
    g_autofree char *dual = g_build_filename(tmpdir, "dual-personality.dcm", NULL);
    g_assert_true(g_file_set_contents(dual, bytes, (gssize)len, NULL));

    g_assert_cmpint(cl_image_detect_format((const guint8 *)bytes, len), ==, CL_IMAGE_FORMAT_DICOM);
    g_autoptr(ClImage) img = load_ok(dual);
    g_assert_cmpint(img->format, ==, CL_IMAGE_FORMAT_DICOM);
    g_assert_cmpuint(img->width, ==, 5);
    g_assert_cmpuint(img->height, ==, 6);
    for (guint i = 0; i < 30; i++)
        g_assert_cmpfloat(cl_image_plane(img, 0, 0)[i], ==, (float)(i * 7));

    /* the preamble alone is the TIFF it claims to be (so the test is of a real dual file) */
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) tiff =
        cl_image_load_data((const guint8 *)bytes, 128, "preamble", NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpint(tiff->format, ==, CL_IMAGE_FORMAT_TIFF);
    g_assert_cmpfloat(cl_image_plane(tiff, 0, 0)[0], ==, 0x5A);
}

/* A character set Latin-1 guessing would get wrong: ISO-8859-5 (Cyrillic) names. */
static void test_charset_cyrillic(void)
{
    g_autofree char *path =
        write_grey("cyrillic.dcm", 2, 2, 1, 4, EXS_LittleEndianExplicit, [](DcmDataset *ds) {
            ds->putAndInsertString(DCM_SpecificCharacterSet, "ISO_IR 144");
            ds->putAndInsertString(DCM_PatientName, "\xb8\xd2\xd0\xdd\xde\xd2^\xb8\xd2\xd0\xdd");
            ds->putAndInsertString(DCM_StudyDescription, "\xc0\xd5\xdd\xe2\xd3\xd5\xdd");
        });
    g_autoptr(ClImage) img = load_ok(path);
    g_assert_cmpstr(img->patient_name, ==, "Иванов^Иван");
    g_assert_cmpstr(cl_image_get_meta(img, "StudyDescription"), ==, "Рентген");
    g_assert_cmpstr(cl_image_get_meta(img, "SpecificCharacterSet"), ==, "ISO_IR 144");
}

/* Imager Pixel Spacing fallback, AcquisitionDate + AcquisitionTime, RescaleType. */
static void test_imager_spacing(void)
{
    g_autoptr(ClImage) img = load_fixture("dicom-mono1-12in16-implicit.dcm");
    g_assert_true(img->has_pixel_spacing);
    g_assert_cmpfloat_with_epsilon(img->pixel_spacing[0], 0.2, 1e-12);
    g_assert_cmpfloat_with_epsilon(img->pixel_spacing[1], 0.25, 1e-12);
    g_assert_cmpstr(cl_image_get_meta(img, "PixelSpacingSource"), ==, "ImagerPixelSpacing");
    g_assert_cmpstr(img->acquisition_datetime, ==, "20230102101112");
    g_assert_null(img->study_datetime);
    g_assert_cmpstr(img->rescale_type, ==, "US");
    g_assert_cmpint(img->instance_number, ==, -1);
    g_assert_cmpuint(img->bits, ==, 12);
    g_assert_cmpuint(img->bits_allocated, ==, 16);
    g_assert_cmpuint(img->windows->len, ==, 0);
    g_assert_cmpstr(img->photometric, ==, "MONOCHROME1"); /* no inversion in the loader */
}

static void test_ct_rescale_window(void)
{
    g_autoptr(ClImage) img = load_fixture("dicom-ct-s16-be.dcm");
    g_assert_cmpstr(img->rescale_type, ==, "HU");
    g_assert_cmpuint(img->windows->len, ==, 1);
    g_assert_cmpfloat(g_array_index(img->windows, ClWindowPreset, 0).center, ==, 40);
    g_assert_cmpfloat(g_array_index(img->windows, ClWindowPreset, 0).width, ==, 400);
    g_assert_null(g_array_index(img->windows, ClWindowPreset, 0).explanation);
    g_assert_true(img->sample_format == CL_SAMPLE_INT);
    g_assert_false(img->has_pixel_spacing);
}

static void test_voi_lut(void)
{
    g_autoptr(ClImage) img = load_fixture("dicom-voi-lut.dcm");
    g_assert_cmpuint(img->voi_luts->len, ==, 2);
    const ClVoiLut *a = (const ClVoiLut *)g_ptr_array_index(img->voi_luts, 0);
    const ClVoiLut *b = (const ClVoiLut *)g_ptr_array_index(img->voi_luts, 1);
    g_assert_cmpuint(a->n_entries, ==, 4096);
    g_assert_cmpfloat(a->first_value, ==, -2048); /* signed: Pixel Representation 1 */
    g_assert_cmpuint(a->bits, ==, 16);
    g_assert_cmpuint(a->data[0], ==, 0);
    g_assert_cmpuint(a->data[1], ==, 16);
    g_assert_cmpuint(a->data[4095], ==, 65520);
    g_assert_cmpstr(a->explanation, ==, "Linear 16-bit");
    g_assert_cmpuint(b->n_entries, ==, 65536); /* descriptor 0 */
    g_assert_cmpfloat(b->first_value, ==, 0);
    g_assert_cmpuint(b->bits, ==, 8);
    g_assert_cmpuint(b->data[255], ==, 0);
    g_assert_cmpuint(b->data[256], ==, 1);
    g_assert_cmpuint(b->data[65535], ==, 255);
    g_assert_cmpstr(b->explanation, ==, "Coarse 8-bit");
}

static void test_colour_conversion_noted(void)
{
    g_autoptr(ClImage) jpeg = load_fixture("dicom-jpeg-baseline-rgb.dcm");
    g_assert_cmpstr(jpeg->photometric, ==, "YBR_FULL_422");
    g_assert_nonnull(cl_image_get_meta(jpeg, "ColourConversion"));
    g_assert_nonnull(strstr(cl_image_get_meta(jpeg, "ColourConversion"), "RGB"));
    g_autoptr(ClImage) pal = load_fixture("dicom-palette.dcm");
    g_assert_cmpuint(pal->channels, ==, 3);
    g_assert_nonnull(cl_image_get_meta(pal, "ColourConversion"));
    g_autoptr(ClImage) rgb = load_fixture("dicom-rgb-planar1.dcm");
    g_assert_null(cl_image_get_meta(rgb, "ColourConversion"));
}

/* Enhanced multi-frame: rescale per frame from Per-frame Functional Groups, spacing and window
 * from Shared Functional Groups. */
static void test_enhanced_per_frame(void)
{
    static const char *slopes[] = { "1", "2.5", "-0.5" };
    static const char *intercepts[] = { "0", "-10.5", "3" };
    g_autofree char *path = write_grey(
        "enhanced.dcm", 6, 8, 3, 6 * 8 * 3, EXS_LittleEndianExplicit, [](DcmDataset *ds) {
            ds->putAndInsertString(DCM_SOPClassUID, UID_EnhancedMRImageStorage);
            ds->putAndInsertString(DCM_ContentDate, "20200304");
            ds->putAndInsertString(DCM_ContentTime, "050607");
            DcmItem *shared = NULL;
            ds->findOrCreateSequenceItem(DCM_SharedFunctionalGroupsSequence, shared, 0);
            DcmItem *pm = NULL;
            shared->findOrCreateSequenceItem(DCM_PixelMeasuresSequence, pm, 0);
            pm->putAndInsertString(DCM_PixelSpacing, "0.5\\0.6");
            DcmItem *voi = NULL;
            shared->findOrCreateSequenceItem(DCM_FrameVOILUTSequence, voi, 0);
            voi->putAndInsertString(DCM_WindowCenter, "100");
            voi->putAndInsertString(DCM_WindowWidth, "50");
            voi->putAndInsertString(DCM_WindowCenterWidthExplanation, "SHARED");
            for (int f = 0; f < 3; f++) {
                DcmItem *pf = NULL, *pvt = NULL;
                ds->findOrCreateSequenceItem(DCM_PerFrameFunctionalGroupsSequence, pf, f);
                pf->findOrCreateSequenceItem(DCM_PixelValueTransformationSequence, pvt, 0);
                pvt->putAndInsertString(DCM_RescaleSlope, slopes[f]);
                pvt->putAndInsertString(DCM_RescaleIntercept, intercepts[f]);
                pvt->putAndInsertString(DCM_RescaleType, "US");
            }
        });
    g_autoptr(ClImage) img = load_ok(path);
    g_assert_cmpuint(cl_image_n_frames(img), ==, 3);
    static const double want_s[] = { 1, 2.5, -0.5 }, want_b[] = { 0, -10.5, 3 };
    for (guint f = 0; f < 3; f++) {
        g_assert_cmpfloat(cl_image_frame(img, f)->rescale_slope, ==, want_s[f]);
        g_assert_cmpfloat(cl_image_frame(img, f)->rescale_intercept, ==, want_b[f]);
        /* and the pixels of frame f are the words written for it */
        g_assert_cmpfloat(cl_image_plane(img, f, 0)[1], ==, (float)((f * 48 + 1) * 7));
    }
    g_assert_true(img->has_pixel_spacing);
    g_assert_cmpfloat(img->pixel_spacing[0], ==, 0.5);
    g_assert_cmpfloat(img->pixel_spacing[1], ==, 0.6);
    g_assert_cmpstr(cl_image_get_meta(img, "PixelSpacingSource"), ==, "PixelMeasuresSequence");
    g_assert_cmpuint(img->windows->len, ==, 1);
    g_assert_cmpstr(g_array_index(img->windows, ClWindowPreset, 0).explanation, ==, "SHARED");
    g_assert_cmpstr(img->acquisition_datetime, ==, "20200304050607"); /* Content Date + Time */
    g_assert_cmpstr(img->rescale_type, ==, "US");
}

/* ---- limits and damaged headers ---- */

static void test_too_large(void)
{
    /* 60000 × 60000 × 1000 frames with a few bytes of pixel data: refused by size first. */
    g_autofree char *path =
        write_grey("huge.dcm", 60000, 60000, 1000, 64, EXS_LittleEndianExplicit, {});
    expect_error(path, CL_IMAGE_ERROR_TOO_LARGE, { "60000" });
    /* the same header over a JPEG-LS stream: refused before the decoder sizes its output */
    g_autofree char *enc = write_grey(
        "huge-jpegls.dcm", 60000, 60000, 1000, 64, EXS_JPEGLSLossless, [](DcmDataset *ds) {
            encapsulate(ds, EXS_JPEGLSLossless, { 0xFF, 0xD8, 0xFF, 0xD9 });
        });
    expect_error(enc, CL_IMAGE_ERROR_TOO_LARGE, {});

    /* caller limits */
    const ClFixture *mf = fixture("dicom-multiframe5.dcm");
    g_autofree char *data = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(mf->path, &data, &len, NULL));
    ClImageLimits lim;
    cl_image_limits_init(&lim);
    lim.max_frames = 4;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load_data((const guint8 *)data, len, "mf", &lim, &err);
    g_assert_null(img);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_clear_error(&err);
    cl_image_limits_init(&lim);
    lim.max_pixels = 24 * 16 * 5 - 1;
    g_autoptr(ClImage) img2 = cl_image_load_data((const guint8 *)data, len, "mf", &lim, &err);
    g_assert_null(img2);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_clear_error(&err);
    lim.max_pixels = 24 * 16 * 5;
    g_autoptr(ClImage) img3 = cl_image_load_data((const guint8 *)data, len, "mf", &lim, &err);
    g_assert_no_error(err);
    g_assert_nonnull(img3);
}

static void test_short_pixel_data(void)
{
    /* one row short: must fail, never pad with zeros */
    g_autofree char *path =
        write_grey("short.dcm", 64, 64, 1, 64 * 63, EXS_LittleEndianExplicit, {});
    expect_error(path, CL_IMAGE_ERROR_CORRUPT, { "Pixel Data", "8064" });
    /* frames: 3 declared, 2 present */
    g_autofree char *mf =
        write_grey("short-frames.dcm", 8, 8, 3, 8 * 8 * 2, EXS_BigEndianExplicit, {});
    expect_error(mf, CL_IMAGE_ERROR_CORRUPT, { "Pixel Data" });
    /* a JPEG-LS fragment that is not a JPEG-LS stream */
    g_autofree char *bad =
        write_grey("bad-jpegls.dcm", 16, 16, 1, 256, EXS_JPEGLSLossless, [](DcmDataset *ds) {
            encapsulate(ds, EXS_JPEGLSLossless, { 0xFF, 0xD8, 0x00, 0x11, 0x22, 0x33, 0xFF, 0xD9 });
        });
    expect_error(bad, CL_IMAGE_ERROR_CORRUPT, { "JPEG-LS" });
}

/* An element claiming nearly 4 GiB in a small file: refused as damaged, quickly (the value is
 * never allocated, since the parse skips it and finds the end of the data first). */
static void test_huge_length(void)
{
    const ClFixture *f = fixture("dicom-mono2-u16-le.dcm");
    g_autofree char *data = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(f->path, &data, &len, NULL));
    static const char pixel_tag[] = "\xe0\x7f\x10\x00OW\0\0";
    char *at = (char *)memmem(data, len, pixel_tag, 8);
    g_assert_nonnull(at);
    memcpy(at + 8, "\xf0\xff\xff\xff", 4);
    /* and a string element (Study Description, 8 bytes) claiming 65534 */
    char *sd = (char *)memmem(data, len, "\x08\x00\x30\x10LO", 6);
    g_assert_nonnull(sd);
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load_data((const guint8 *)data, len, "huge", NULL, &err);
    g_assert_null(img);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    memcpy(at + 8, "\xa6\x06\x00\x00", 4); /* restore 37 × 23 × 2 = 1702 */
    memcpy(sd + 6, "\xfe\xff", 2);
    g_clear_error(&err);
    g_autoptr(ClImage) img2 = cl_image_load_data((const guint8 *)data, len, "huge", NULL, &err);
    g_assert_null(img2);
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 2 * G_USEC_PER_SEC);
}

static void test_no_pixel_data(void)
{
    g_autofree char *path =
        write_grey("report.dcm", 1, 1, 1, 0, EXS_LittleEndianExplicit, [](DcmDataset *ds) {
            ds->putAndInsertString(DCM_SOPClassUID, UID_BasicTextSRStorage);
            ds->putAndInsertString(DCM_Modality, "SR");
            for (const DcmTagKey &k :
                 { DCM_Rows, DCM_Columns, DCM_SamplesPerPixel, DCM_PhotometricInterpretation,
                   DCM_BitsAllocated, DCM_BitsStored, DCM_HighBit, DCM_PixelRepresentation })
                ds->findAndDeleteElement(k);
        });
    expect_error(path, CL_IMAGE_ERROR_UNSUPPORTED, { "no image", "Pixel Data", "Basic Text SR" });
}

static void test_unsupported_syntax(void)
{
    /* a syntax DCMTK 3.6.7 does not even know (JPEG XL): the meta header is written by hand */
    g_autofree char *jxl = write_grey(
        "jpegxl.dcm", 16, 16, 1, 256, EXS_JPEG2000LosslessOnly,
        [](DcmDataset *ds) {
            encapsulate(ds, EXS_JPEG2000LosslessOnly, { 0xFF, 0x0A, 0x00, 0x00 });
        },
        EWM_dontUpdateMeta,
        [](DcmMetaInfo *meta) {
            const Uint8 version[2] = { 0, 1 };
            meta->putAndInsertUint8Array(DCM_FileMetaInformationVersion, version, 2);
            meta->putAndInsertString(DCM_MediaStorageSOPClassUID, UID_SecondaryCaptureImageStorage);
            meta->putAndInsertString(DCM_MediaStorageSOPInstanceUID, "2.25.99001");
            meta->putAndInsertString(DCM_TransferSyntaxUID, "1.2.840.10008.1.2.4.110");
        });
    expect_error(jxl, CL_IMAGE_ERROR_UNSUPPORTED,
                 { "JPEG XL", "1.2.840.10008.1.2.4.110", "cannot decode" });

    /* known to DCMTK, but no decoder: JPEG Extended process 3+5 (retired) */
    g_autofree char *p35 =
        write_grey("jpeg35.dcm", 16, 16, 1, 256, EXS_JPEGProcess3_5, [](DcmDataset *ds) {
            encapsulate(ds, EXS_JPEGProcess3_5, { 0xFF, 0xD8, 0xFF, 0xD9 });
        });
    expect_error(p35, CL_IMAGE_ERROR_UNSUPPORTED, { "1.2.840.10008.1.2.4.52", "cannot decode" });
    /* JPEG 2000 Part 2 (multi-component): OpenJPEG decodes Part 1 and HTJ2K only */
    g_autofree char *part2 = write_grey(
        "j2k92.dcm", 16, 16, 1, 256, EXS_JPEG2000MulticomponentLosslessOnly, [](DcmDataset *ds) {
            encapsulate(ds, EXS_JPEG2000MulticomponentLosslessOnly, { 0xFF, 0x4F, 0xFF, 0x51 });
        });
    expect_error(part2, CL_IMAGE_ERROR_UNSUPPORTED, { "1.2.840.10008.1.2.4.92", "cannot decode" });
}

/* ---- JPEG 2000 ---- */

/* The fragments (codestream) of a JPEG 2000 fixture's single frame. */
static std::vector<Uint8> fixture_codestream(const char *file)
{
    DcmFileFormat ff;
    g_assert_true(ff.loadFile(fixture(file)->path).good());
    DcmPixelData *pd = NULL;
    DcmElement *e = NULL;
    g_assert_true(ff.getDataset()->findAndGetElement(DCM_PixelData, e).good());
    pd = OFdynamic_cast(DcmPixelData *, e);
    DcmPixelSequence *seq = NULL;
    g_assert_true(pd->getEncapsulatedRepresentation(EXS_JPEG2000LosslessOnly, NULL, seq).good());
    std::vector<Uint8> cs;
    for (unsigned long i = 1; i < seq->card(); i++) {
        DcmPixelItem *item = NULL;
        Uint8 *b = NULL;
        g_assert_true(seq->getItem(item, i).good());
        g_assert_true(item->getUint8Array(b).good());
        cs.insert(cs.end(), b, b + item->getLength());
    }
    return cs;
}

/* Encapsulated Pixel Data from fragments and a Basic Offset Table, as given. */
static void encapsulate_frags(DcmDataset *ds, E_TransferSyntax xfer,
                              const std::vector<Uint8> &table,
                              const std::vector<std::vector<Uint8>> &frags)
{
    ds->findAndDeleteElement(DCM_PixelData);
    DcmPixelSequence *seq = new DcmPixelSequence(DcmTag(DCM_PixelData, EVR_OB));
    DcmPixelItem *bot = new DcmPixelItem(DcmTag(DCM_Item, EVR_OB));
    if (!table.empty())
        bot->putUint8Array(table.data(), (unsigned long)table.size());
    seq->insert(bot);
    for (const auto &f : frags) {
        DcmPixelItem *frag = new DcmPixelItem(DcmTag(DCM_Item, EVR_OB));
        frag->putUint8Array(f.data(), (unsigned long)f.size());
        seq->insert(frag);
    }
    DcmPixelData *pd = new DcmPixelData(DCM_PixelData);
    pd->putOriginalRepresentation(xfer, NULL, seq);
    ds->insert(pd, OFTrue);
}

/* What cannot be decoded is refused with a message, never a crash or a wrong image. The
 * codestream is dicom-j2k-u16.dcm's (37 × 23, 16-bit). */
static void test_j2k_errors(void)
{
    static std::vector<Uint8> cs;
    cs = fixture_codestream("dicom-j2k-u16.dcm");
    g_assert_cmpuint(cs.size(), >, 200);
    struct Case {
        const char *name;
        guint rows, cols, frames;
        E_TransferSyntax xfer;
        std::function<void(DcmDataset *)> edit;
        std::initializer_list<const char *> words;
    };
    const Case cases[] = {
        { "j2k-not-codestream.dcm",
          16,
          16,
          1,
          EXS_JPEG2000,
          [](DcmDataset *ds) {
              encapsulate(ds, EXS_JPEG2000, { 0xFF, 0x4F, 0xFF, 0x51 });
          },
          { "JPEG 2000", "not a readable JPEG 2000 codestream" } },
        { "j2k-garbage.dcm",
          16,
          16,
          1,
          EXS_JPEG2000LosslessOnly,
          [](DcmDataset *ds) {
              encapsulate(ds, EXS_JPEG2000LosslessOnly, std::vector<Uint8>(64, 0x5A));
          },
          { "not a readable JPEG 2000 codestream" } },
        { "j2k-truncated.dcm",
          23,
          37,
          1,
          EXS_JPEG2000LosslessOnly,
          [](DcmDataset *ds) {
              std::vector<Uint8> half(cs.begin(), cs.begin() + (std::ptrdiff_t)(cs.size() / 2));
              half.resize(half.size() & ~(size_t)1);
              encapsulate(ds, EXS_JPEG2000LosslessOnly, half);
          },
          { "truncated or damaged" } },
        { "j2k-no-fragments.dcm",
          23,
          37,
          1,
          EXS_JPEG2000LosslessOnly,
          [](DcmDataset *ds) { encapsulate_frags(ds, EXS_JPEG2000LosslessOnly, {}, {}); },
          { "no fragments" } },
        { "j2k-geometry.dcm",
          22,
          37,
          1,
          EXS_JPEG2000LosslessOnly,
          [](DcmDataset *ds) { encapsulate(ds, EXS_JPEG2000LosslessOnly, cs); },
          { "37 × 23", "the header says 37 × 22" } },
        { "j2k-bits-stored.dcm",
          23,
          37,
          1,
          EXS_JPEG2000LosslessOnly,
          [](DcmDataset *ds) {
              ds->putAndInsertUint16(DCM_BitsStored, 12);
              ds->putAndInsertUint16(DCM_HighBit, 11);
              encapsulate(ds, EXS_JPEG2000LosslessOnly, cs);
          },
          { "does not fit the 12 bits stored" } },
        { "j2k-frames-missing.dcm",
          23,
          37,
          3,
          EXS_JPEG2000LosslessOnly,
          [](DcmDataset *ds) {
              encapsulate_frags(ds, EXS_JPEG2000LosslessOnly, {}, { cs, cs });
          },
          { "2 codestreams in 2 fragments for the 3 frames" } },
        { "j2k-bot-count.dcm",
          23,
          37,
          2,
          EXS_JPEG2000LosslessOnly,
          [](DcmDataset *ds) {
              encapsulate_frags(ds, EXS_JPEG2000LosslessOnly, { 0, 0, 0, 0 }, { cs, cs });
          },
          { "Basic Offset Table has 4 bytes" } },
        { "j2k-bot-offset.dcm",
          23,
          37,
          2,
          EXS_JPEG2000LosslessOnly,
          [](DcmDataset *ds) {
              encapsulate_frags(ds, EXS_JPEG2000LosslessOnly, { 0, 0, 0, 0, 10, 0, 0, 0 },
                                { cs, cs });
          },
          { "offset 10 for frame 2 is not the start of a fragment" } },
        { "htj2k-damaged.dcm",
          16,
          16,
          1,
          EXS_JPEG2000LosslessOnly,
          [](DcmDataset *ds) {
              encapsulate(ds, EXS_JPEG2000LosslessOnly, { 0xFF, 0x4F, 0xFF, 0x51, 0, 0 });
          },
          { "High-Throughput JPEG 2000", "not a readable JPEG 2000 codestream" } },
    };
    for (const Case &c : cases) {
        const bool ht = g_str_has_prefix(c.name, "htj2k");
        g_autofree char *path = write_grey(
            c.name, c.rows, c.cols, c.frames, c.rows * c.cols * c.frames, c.xfer, c.edit,
            ht ? EWM_dontUpdateMeta : EWM_createNewMeta, [ht](DcmMetaInfo *meta) {
                if (!ht)
                    return;
                const Uint8 version[2] = { 0, 1 };
                meta->putAndInsertUint8Array(DCM_FileMetaInformationVersion, version, 2);
                meta->putAndInsertString(DCM_MediaStorageSOPClassUID,
                                         UID_SecondaryCaptureImageStorage);
                meta->putAndInsertString(DCM_MediaStorageSOPInstanceUID, "2.25.99001");
                meta->putAndInsertString(DCM_TransferSyntaxUID, "1.2.840.10008.1.2.4.201");
            });
        expect_error(path, CL_IMAGE_ERROR_CORRUPT, c.words);
    }
}

/* A JPEG 2000 file and its uncompressed twin load to the same image: geometry, sample format,
 * rescale, windows and every value. */
static void test_j2k_twins(void)
{
    static const char *const pairs[][2] = {
        { "dicom-j2k-u16.dcm", "dicom-j2k-u16-native.dcm" },
        { "dicom-j2k-s12.dcm", "dicom-j2k-s12-native.dcm" },
        { "dicom-j2k-rct.dcm", "dicom-j2k-rct-native.dcm" },
    };
    for (const auto &p : pairs) {
        g_autoptr(ClImage) a = load_fixture(p[0]);
        g_autoptr(ClImage) b = load_fixture(p[1]);
        g_assert_cmpstr(a->transfer_syntax_uid, ==, "1.2.840.10008.1.2.4.90");
        g_assert_cmpstr(b->transfer_syntax_uid, ==, "1.2.840.10008.1.2.1");
        g_assert_cmpuint(a->width, ==, b->width);
        g_assert_cmpuint(a->height, ==, b->height);
        g_assert_cmpuint(a->channels, ==, b->channels);
        g_assert_cmpuint(a->bits, ==, b->bits);
        g_assert_cmpuint(a->bits_allocated, ==, b->bits_allocated);
        g_assert_cmpint(a->sample_format, ==, b->sample_format);
        g_assert_cmpuint(cl_image_n_frames(a), ==, cl_image_n_frames(b));
        g_assert_cmpuint(a->windows->len, ==, b->windows->len);
        for (guint f = 0; f < cl_image_n_frames(a); f++) {
            const ClFrame *fa = cl_image_frame(a, f), *fb = cl_image_frame(b, f);
            g_assert_cmpfloat(fa->rescale_slope, ==, fb->rescale_slope);
            g_assert_cmpfloat(fa->rescale_intercept, ==, fb->rescale_intercept);
            const gsize n = (gsize)a->width * a->height * a->channels;
            g_assert_cmpmem(fa->data, n * sizeof(float), fb->data, n * sizeof(float));
        }
    }
    g_autoptr(ClImage) rct = load_fixture("dicom-j2k-rct.dcm");
    g_assert_cmpstr(rct->photometric, ==, "YBR_RCT");
    g_assert_nonnull(strstr(cl_image_get_meta(rct, "ColourConversion"), "YBR_RCT"));
}

static void test_bad_headers(void)
{
    struct Case {
        const char *name;
        ClImageError code;
        Edit edit;
    };
    const Case cases[] = {
        { "bs-over-ba.dcm", CL_IMAGE_ERROR_CORRUPT,
          [](DcmDataset *ds) { ds->putAndInsertUint16(DCM_BitsStored, 17); } },
        { "hb-low.dcm", CL_IMAGE_ERROR_CORRUPT,
          [](DcmDataset *ds) {
              ds->putAndInsertUint16(DCM_BitsStored, 12);
              ds->putAndInsertUint16(DCM_HighBit, 3);
          } },
        { "ba-12.dcm", CL_IMAGE_ERROR_UNSUPPORTED,
          [](DcmDataset *ds) { ds->putAndInsertUint16(DCM_BitsAllocated, 12); } },
        { "spp-3-mono.dcm", CL_IMAGE_ERROR_CORRUPT,
          [](DcmDataset *ds) { ds->putAndInsertUint16(DCM_SamplesPerPixel, 3); } },
        { "frames-0.dcm", CL_IMAGE_ERROR_CORRUPT,
          [](DcmDataset *ds) { ds->putAndInsertString(DCM_NumberOfFrames, "0"); } },
        { "no-rows.dcm", CL_IMAGE_ERROR_CORRUPT,
          [](DcmDataset *ds) { ds->findAndDeleteElement(DCM_Rows); } },
        { "pr-2.dcm", CL_IMAGE_ERROR_CORRUPT,
          [](DcmDataset *ds) { ds->putAndInsertUint16(DCM_PixelRepresentation, 2); } },
        { "hsv.dcm", CL_IMAGE_ERROR_UNSUPPORTED,
          [](DcmDataset *ds) { ds->putAndInsertString(DCM_PhotometricInterpretation, "HSV"); } },
        { "segmented-palette.dcm", CL_IMAGE_ERROR_UNSUPPORTED,
          [](DcmDataset *ds) {
              ds->putAndInsertString(DCM_PhotometricInterpretation, "PALETTE COLOR");
              const Uint16 desc[3] = { 256, 0, 16 }, seg[4] = { 0, 1, 0, 0 };
              ds->putAndInsertUint16Array(DCM_RedPaletteColorLookupTableDescriptor, desc, 3);
              ds->putAndInsertUint16Array(DCM_SegmentedRedPaletteColorLookupTableData, seg, 4);
          } },
        { "palette-short.dcm", CL_IMAGE_ERROR_CORRUPT,
          [](DcmDataset *ds) {
              ds->putAndInsertString(DCM_PhotometricInterpretation, "PALETTE COLOR");
              const Uint16 desc[3] = { 256, 0, 16 }, lut[4] = { 1, 2, 3, 4 };
              for (const DcmTagKey &k : { DCM_RedPaletteColorLookupTableDescriptor,
                                          DCM_GreenPaletteColorLookupTableDescriptor,
                                          DCM_BluePaletteColorLookupTableDescriptor })
                  ds->putAndInsertUint16Array(k, desc, 3);
              for (const DcmTagKey &k :
                   { DCM_RedPaletteColorLookupTableData, DCM_GreenPaletteColorLookupTableData,
                     DCM_BluePaletteColorLookupTableData })
                  ds->putAndInsertUint16Array(k, lut, 4);
          } },
    };
    for (const Case &c : cases) {
        g_autofree char *path = write_grey(c.name, 8, 8, 1, 64, EXS_LittleEndianExplicit, c.edit);
        expect_error(path, c.code, {});
    }
}

/* A data set without the 128-byte preamble and meta header (ACR-NEMA style stream). */
static void test_no_preamble(void)
{
    g_autofree char *path =
        write_grey("bare.dcm", 4, 5, 1, 20, EXS_LittleEndianImplicit, {}, EWM_dataset);
    g_autoptr(ClImage) img = load_ok(path);
    g_assert_cmpuint(img->width, ==, 5);
    g_assert_cmpuint(img->height, ==, 4);
    g_assert_cmpstr(img->transfer_syntax_uid, ==, "1.2.840.10008.1.2");
    for (guint i = 0; i < 20; i++)
        g_assert_cmpfloat(cl_image_plane(img, 0, 0)[i], ==, (float)(i * 7));
}

/* ---- sequences nested thousands deep ---- */

static void put16(GByteArray *b, guint v, bool be)
{
    guint8 x[2] = { (guint8)(be ? v >> 8 : v), (guint8)(be ? v : v >> 8) };
    g_byte_array_append(b, x, 2);
}

static void put32(GByteArray *b, guint32 v, bool be)
{
    put16(b, be ? v >> 16 : v & 0xFFFF, be);
    put16(b, be ? v & 0xFFFF : v >> 16, be);
}

static void put_tag(GByteArray *b, guint g, guint e, bool be)
{
    put16(b, g, be);
    put16(b, e, be);
}

/* A sequence header (0040,A730) of length l in the data set's encoding. */
static void put_sq(GByteArray *b, guint32 l, bool implicit, bool be)
{
    put_tag(b, 0x0040, 0xA730, be);
    if (!implicit) {
        g_byte_array_append(b, (const guint8 *)"SQ\0\0", 4);
    }
    put32(b, l, be);
}

/* Preamble, meta header (explicit VR little endian) naming the syntax, then a data set of
 * `depth` sequences each in the one item of the one before: lengths undefined (closed by
 * delimiters) or defined (built from the inside out). */
static GByteArray *deep_dicom(const char *syntax, guint depth, bool defined)
{
    const bool implicit = strcmp(syntax, "1.2.840.10008.1.2") == 0;
    const bool be = strcmp(syntax, "1.2.840.10008.1.2.2") == 0;
    GByteArray *meta = g_byte_array_new();
    put_tag(meta, 0x0002, 0x0010, false);
    g_byte_array_append(meta, (const guint8 *)"UI", 2);
    guint n = (guint)strlen(syntax);
    put16(meta, n + (n & 1), false);
    g_byte_array_append(meta, (const guint8 *)syntax, n);
    if (n & 1)
        g_byte_array_append(meta, (const guint8 *)"", 1);
    GByteArray *b = g_byte_array_new();
    g_byte_array_set_size(b, 128);
    memset(b->data, 0, 128);
    g_byte_array_append(b, (const guint8 *)"DICM", 4);
    put_tag(b, 0x0002, 0x0000, false);
    g_byte_array_append(b, (const guint8 *)"UL", 2);
    put16(b, 4, false);
    put32(b, meta->len, false);
    g_byte_array_append(b, meta->data, meta->len);
    g_byte_array_unref(meta);
    if (!defined) {
        for (guint i = 0; i < depth; i++) {
            put_sq(b, 0xFFFFFFFFu, implicit, be);
            put_tag(b, 0xFFFE, 0xE000, be);
            put32(b, 0xFFFFFFFFu, be);
        }
        for (guint i = 0; i < depth; i++) {
            put_tag(b, 0xFFFE, 0xE00D, be);
            put32(b, 0, be);
            put_tag(b, 0xFFFE, 0xE0DD, be);
            put32(b, 0, be);
        }
        return b;
    }
    GByteArray *inner = g_byte_array_new();
    for (guint i = 0; i < depth; i++) {
        GByteArray *outer = g_byte_array_new();
        put_sq(outer, inner->len + 8, implicit, be);
        put_tag(outer, 0xFFFE, 0xE000, be);
        put32(outer, inner->len, be);
        g_byte_array_append(outer, inner->data, inner->len);
        g_byte_array_unref(inner);
        inner = outer;
    }
    g_byte_array_append(b, inner->data, inner->len);
    g_byte_array_unref(inner);
    return b;
}

/* 6,000 levels ran DCMTK's recursive reader off the stack (a crash); now an error, in every
 * encoding and with lengths defined or not, while 100 levels are still read (and refused only
 * for having no image). */
static void test_deep_sequences(void)
{
    const char *const syntaxes[] = { "1.2.840.10008.1.2.1", "1.2.840.10008.1.2",
                                     "1.2.840.10008.1.2.2" };
    for (const char *syntax : syntaxes) {
        for (bool defined : { false, true }) {
            for (guint depth : { 6000u, 100u }) {
                GByteArray *b = deep_dicom(syntax, depth, defined);
                g_autoptr(GError) err = NULL;
                g_autoptr(ClImage) img =
                    cl_image_load_data(b->data, b->len, "deep.dcm", NULL, &err);
                g_byte_array_unref(b);
                g_assert_null(img);
                g_assert_nonnull(err);
                const bool refused = strstr(err->message, "more than 128 levels deep") != NULL;
                if (refused != (depth > 128))
                    g_error("%s, %s lengths, %u levels: %s", syntax,
                            defined ? "defined" : "undefined", depth, err->message);
            }
        }
    }
}

/* DCMTK must stay quiet: every problem reaches the user as a GError, not as stderr noise. Run in
 * a fresh process, where nothing but the loader has touched DCMTK's logging (the fixture writer
 * silences it too), over every DICOM file the other tests wrote, whole and cut. */
static void quiet_child(void)
{
    const char *dir = g_getenv("CL_DICOM_QUIET_DIR");
    g_assert_nonnull(dir);
    GDir *d = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(d);
    guint files = 0;
    const char *name;
    while ((name = g_dir_read_name(d))) {
        if (!g_str_has_suffix(name, ".dcm"))
            continue;
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_autofree char *data = NULL;
        gsize len = 0;
        g_assert_true(g_file_get_contents(path, &data, &len, NULL));
        for (gsize cut : { len / 3, len / 2, len - 1, len }) {
            g_autoptr(GError) err = NULL;
            g_autoptr(ClImage) img =
                cl_image_load_data((const guint8 *)data, cut, name, NULL, &err);
            g_assert_true(img != NULL || err != NULL);
        }
        files++;
    }
    g_dir_close(d);
    g_assert_cmpuint(files, >=, 20);
}

static void test_quiet(void)
{
    if (g_test_subprocess()) {
        quiet_child();
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    g_test_trap_assert_stderr(""); /* nothing at all */
}

/* Codec registration is once and thread-safe: decode from several threads at once. */
static gpointer load_many(gpointer data)
{
    (void)data;
    static const char *files[] = { "dicom-jpegls-16.dcm", "dicom-rle-rgb8.dcm",
                                   "dicom-jpeg-lossless-16.dcm", "dicom-jpeg-baseline-rgb.dcm",
                                   "dicom-deflated.dcm" };
    for (int round = 0; round < 4; round++)
        for (const char *file : files) {
            const ClFixture *f = fixture(file);
            g_autoptr(GError) err = NULL;
            if (!cl_fixture_load_and_check(f, &err))
                return g_strdup(err->message);
        }
    return NULL;
}

static void test_threads(void)
{
    GThread *threads[8];
    for (int i = 0; i < 8; i++)
        threads[i] = g_thread_new("dicom", load_many, NULL);
    for (int i = 0; i < 8; i++) {
        g_autofree char *msg = (char *)g_thread_join(threads[i]);
        if (msg)
            g_error("thread %d: %s", i, msg);
    }
}

static void test_codecs(void)
{
    const char *codecs = cl_image_dicom_codecs();
    g_assert_nonnull(strstr(codecs, "JPEG-LS"));
    g_assert_nonnull(strstr(codecs, "RLE"));
    g_assert_nonnull(strstr(codecs, "deflate"));
    g_assert_nonnull(strstr(codecs, "JPEG 2000"));
    g_assert_nonnull(strstr(codecs, "HTJ2K"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    fixtures = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    if (g_test_subprocess()) {
        /* /dicom/quiet's child: the parent's files, no fixture writer, nothing removed */
        g_test_add_func("/dicom/quiet", test_quiet);
        return g_test_run();
    }
    tmpdir = cl_fixture_tmpdir("cl-test-dicom");
    g_setenv("CL_DICOM_QUIET_DIR", tmpdir, TRUE); /* before any thread starts */
    g_autoptr(GError) err = NULL;
    if (!cl_fixtures_dicom(tmpdir, fixtures, &err))
        g_error("writing DICOM fixtures: %s", err->message);
    g_assert_cmpuint(fixtures->len, >=, 14);
    cl_fixture_add_tests("dicom", fixtures, test_fixture);
    g_test_add_func("/dicom/metadata", test_metadata);
    g_test_add_func("/dicom/top-level-attributes", test_top_level_attributes);
    g_test_add_func("/dicom/dual-personality", test_dual_personality);
    g_test_add_func("/dicom/charset-cyrillic", test_charset_cyrillic);
    g_test_add_func("/dicom/imager-spacing", test_imager_spacing);
    g_test_add_func("/dicom/ct-rescale-window", test_ct_rescale_window);
    g_test_add_func("/dicom/voi-lut", test_voi_lut);
    g_test_add_func("/dicom/colour-conversion", test_colour_conversion_noted);
    g_test_add_func("/dicom/enhanced-per-frame", test_enhanced_per_frame);
    g_test_add_func("/dicom/too-large", test_too_large);
    g_test_add_func("/dicom/short-pixel-data", test_short_pixel_data);
    g_test_add_func("/dicom/huge-length", test_huge_length);
    g_test_add_func("/dicom/no-pixel-data", test_no_pixel_data);
    g_test_add_func("/dicom/unsupported-syntax", test_unsupported_syntax);
    g_test_add_func("/dicom/j2k-errors", test_j2k_errors);
    g_test_add_func("/dicom/j2k-twins", test_j2k_twins);
    g_test_add_func("/dicom/bad-headers", test_bad_headers);
    g_test_add_func("/dicom/no-preamble", test_no_preamble);
    g_test_add_func("/dicom/deep-sequences", test_deep_sequences);
    g_test_add_func("/dicom/threads", test_threads);
    g_test_add_func("/dicom/codecs", test_codecs);
    g_test_add_func("/dicom/quiet", test_quiet);
    int rc = g_test_run();
    g_ptr_array_unref(fixtures);
    cl_fixture_rmdir(tmpdir);
    g_free(tmpdir);
    return rc;
}
