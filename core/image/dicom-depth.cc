/* dicom-depth.cc - how deeply a DICOM data set nests its sequences, before DCMTK reads it.
 *
 * DCMTK reads a sequence by recursing into its items, and an item's sequences the same way, so a
 * file nesting sequences some thousands deep (a few bytes per level) runs the reader off the
 * stack: a crash, not an error. This walk reads element headers only — tags and lengths, in the
 * data set's encoding, with an explicit stack of the levels open — and says whether the nesting
 * stays within a limit. Where it cannot follow the data (truncated, a VR it does not know, a
 * length past the end) it stops and lets DCMTK judge the file: it refuses nothing but depth. */
#include "image/dicom-private.h"

namespace cl_dicom
{

namespace
{

const Uint32 kUndefined = 0xFFFFFFFFu;

struct Reader {
    const Uint8 *p;
    size_t n;
    bool big_endian;

    Uint16 u16(size_t at) const
    {
        return big_endian ? (Uint16)((p[at] << 8) | p[at + 1]) : (Uint16)(p[at] | (p[at + 1] << 8));
    }
    Uint32 u32(size_t at) const
    {
        return big_endian ? ((Uint32)u16(at) << 16) | u16(at + 2)
                          : (Uint32)u16(at) | ((Uint32)u16(at + 2) << 16);
    }
};

/* One open level: a sequence or one of its items, with where it ends when its length is
 * defined. */
struct Level {
    bool sequence;
    bool undefined;
    size_t end;
    bool implicit; /* how the elements inside are encoded (an undefined-length UN: implicit) */
};

/* The explicit VRs with a 4-byte length after two reserved bytes (PS3.5 7.1.2). */
bool long_vr(const Uint8 *vr)
{
    static const char *const vrs[] = { "OB", "OD", "OF", "OL", "OV", "OW", "SQ",
                                       "UC", "UN", "UR", "UT", "SV", "UV" };
    for (const char *v : vrs)
        if (vr[0] == v[0] && vr[1] == v[1])
            return true;
    return false;
}

} /* namespace */

bool nesting_within(const Uint8 *data, size_t len, bool implicit_vr, bool big_endian,
                    unsigned max_depth)
{
    const Reader r{ data, len, big_endian };
    std::vector<Level> open;
    unsigned depth = 0; /* sequences open */
    size_t pos = 0;
    while (pos + 8 <= len) {
        /* levels of defined length end where their length says */
        while (!open.empty() && !open.back().undefined && pos >= open.back().end) {
            depth -= open.back().sequence;
            open.pop_back();
        }
        const Uint16 group = r.u16(pos), elem = r.u16(pos + 2);
        if (group == 0xFFFE) { /* item and delimiters: tag and a 4-byte length, no VR */
            const Uint32 l = r.u32(pos + 4);
            pos += 8;
            if (elem == 0xE000 && !open.empty() && open.back().sequence) {
                if (l != kUndefined && l > len - pos)
                    return true;
                open.push_back({ false, l == kUndefined, pos + (l == kUndefined ? 0 : l),
                                 open.back().implicit });
            } else if (elem == 0xE00D && !open.empty() && !open.back().sequence &&
                       open.back().undefined) {
                open.pop_back();
            } else if (elem == 0xE0DD && !open.empty() && open.back().sequence &&
                       open.back().undefined) {
                depth--;
                open.pop_back();
            } else {
                return true; /* not where a well-formed file has it: DCMTK judges */
            }
            continue;
        }
        const bool implicit = open.empty() ? implicit_vr : open.back().implicit;
        Uint32 l;
        bool sq = false, un = false;
        if (implicit) {
            l = r.u32(pos + 4);
            pos += 8;
        } else {
            const Uint8 *vr = data + pos + 4;
            if (vr[0] < 'A' || vr[0] > 'Z' || vr[1] < 'A' || vr[1] > 'Z')
                return true;
            sq = vr[0] == 'S' && vr[1] == 'Q';
            un = vr[0] == 'U' && vr[1] == 'N';
            if (long_vr(vr)) {
                if (pos + 12 > len)
                    return true;
                l = r.u32(pos + 8);
                pos += 12;
            } else {
                l = r.u16(pos + 6);
                pos += 8;
            }
        }
        const bool pixel_data = group == 0x7FE0 && elem == 0x0010;
        if (pixel_data && l == kUndefined) {
            /* encapsulated: fragments (items of bytes, nothing nested) up to the delimiter */
            while (pos + 8 <= len) {
                const Uint16 g = r.u16(pos), e = r.u16(pos + 2);
                const Uint32 fl = r.u32(pos + 4);
                pos += 8;
                if (g == 0xFFFE && e == 0xE0DD)
                    break;
                if (g != 0xFFFE || e != 0xE000 || fl == kUndefined || fl > len - pos)
                    return true;
                pos += fl;
            }
            continue;
        }
        /* a sequence: SQ, any undefined length, or (implicit VR, where only the dictionary
         * knows) a value that starts with an item */
        const bool starts_with_item = l != kUndefined && l >= 8 && pos + 4 <= len &&
                                      r.u16(pos) == 0xFFFE && r.u16(pos + 2) == 0xE000;
        if (sq || l == kUndefined || (implicit && starts_with_item)) {
            if (++depth > max_depth)
                return false;
            if (l != kUndefined && l > len - pos)
                return true;
            open.push_back({ true, l == kUndefined, pos + (l == kUndefined ? 0 : l),
                             implicit || (un && l == kUndefined) });
            continue;
        }
        if (l > len - pos)
            return true;
        pos += l;
    }
    return true;
}

} /* namespace cl_dicom */
