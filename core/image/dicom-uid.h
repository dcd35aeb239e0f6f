/* dicom-uid.h - a UID under the 2.25 root (PS3.5 B.2): "2.25." and a 128-bit value in decimal
 * without leading zeros. Shared by the synthetic DICOM writer (core/synth/radiograph-dicom.cc),
 * the PACS report objects (core/pacs/pacs-report.cc) and de-identification (core/report/deid.c). */
#pragma once

#include <glib.h>

/* value: the 128 bits as four 32-bit limbs, most significant first; out gets at most len bytes
 * (44 suffice: "2.25." and 39 digits). */
static inline void cl_dicom_uid_2_25(const guint32 value[4], char *out, gsize len)
{
    guint32 limb[4] = { value[0], value[1], value[2], value[3] };
    char digits[48];
    int n = 0;
    gboolean nonzero = TRUE;
    while (nonzero) { /* repeated division by 10 on the limbs */
        guint64 rem = 0;
        nonzero = FALSE;
        for (int i = 0; i < 4; i++) {
            guint64 cur = (rem << 32) | limb[i];
            limb[i] = (guint32)(cur / 10);
            rem = cur % 10;
            nonzero |= limb[i] != 0;
        }
        digits[n++] = (char)('0' + rem);
    }
    char uid[64] = "2.25.";
    int k = 5;
    for (int i = n - 1; i >= 0; i--)
        uid[k++] = digits[i];
    uid[k] = 0;
    g_strlcpy(out, uid, len);
}
