#include "blocks/cubin_symbols.h"

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <string_view>
#include <unordered_set>

namespace twinscope::blocks {
namespace {

constexpr unsigned char kStoCudaEntry = 0x10;

// Bounds-checked view of the image.
class Image {
 public:
  Image(const void* data, size_t size) : data_(static_cast<const unsigned char*>(data)), size_(size) {}

  bool Has(uint64_t offset, uint64_t length) const { return offset <= size_ && length <= size_ - offset; }

  template <typename T>
  bool Read(uint64_t offset, T* out) const {
    if (!Has(offset, sizeof(T))) return false;
    std::memcpy(out, data_ + offset, sizeof(T));
    return true;
  }

  // NUL-terminated string at `offset` inside [table, table + table_size).
  bool String(uint64_t table, uint64_t table_size, uint64_t offset, std::string_view* out) const {
    if (!Has(table, table_size) || offset >= table_size) return false;
    const char* begin = reinterpret_cast<const char*>(data_ + table + offset);
    const void* nul = std::memchr(begin, '\0', table_size - offset);
    if (!nul) return false;
    *out = std::string_view(begin, static_cast<const char*>(nul) - begin);
    return true;
  }

 private:
  const unsigned char* data_;
  size_t size_;
};

Status Bad(const std::string& what) { return Status::Error("cubin is not a valid ELF64 image: " + what); }

}  // namespace

StatusOr<std::vector<std::string>> CubinKernelNames(const void* data, size_t size) {
  if (data == nullptr) return Bad("null image");
  Image img(data, size);
  Elf64_Ehdr eh;
  if (!img.Read(0, &eh)) return Bad("shorter than an ELF header (" + std::to_string(size) + " bytes)");
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return Bad("no ELF magic");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return Bad("not ELFCLASS64");
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return Bad("not little-endian");
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) return Bad("unexpected section header size");
  if (eh.e_shnum == 0) return Bad("no section headers");
  if (!img.Has(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr))) return Bad("section headers out of bounds");

  auto section = [&](uint32_t index, Elf64_Shdr* out) {
    return index < eh.e_shnum && img.Read(eh.e_shoff + uint64_t{index} * sizeof(Elf64_Shdr), out);
  };

  Elf64_Shdr shstr;
  const bool have_shstr =
      section(eh.e_shstrndx, &shstr) && shstr.sh_type == SHT_STRTAB && img.Has(shstr.sh_offset, shstr.sh_size);

  std::vector<std::string> names;
  std::unordered_set<std::string> seen;
  bool found_symtab = false;
  for (uint32_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr symtab;
    if (!section(i, &symtab)) return Bad("section header " + std::to_string(i) + " unreadable");
    if (symtab.sh_type != SHT_SYMTAB) continue;
    found_symtab = true;
    if (symtab.sh_entsize != sizeof(Elf64_Sym)) return Bad("symbol table entry size");
    if (!img.Has(symtab.sh_offset, symtab.sh_size)) return Bad("symbol table out of bounds");
    Elf64_Shdr strtab;
    if (!section(symtab.sh_link, &strtab) || strtab.sh_type != SHT_STRTAB || !img.Has(strtab.sh_offset, strtab.sh_size))
      return Bad("symbol string table missing or out of bounds");
    const uint64_t count = symtab.sh_size / sizeof(Elf64_Sym);
    for (uint64_t k = 1; k < count; ++k) {
      Elf64_Sym sym;
      if (!img.Read(symtab.sh_offset + k * sizeof(Elf64_Sym), &sym)) return Bad("symbol out of bounds");
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC) continue;
      std::string_view name;
      if (!img.String(strtab.sh_offset, strtab.sh_size, sym.st_name, &name) || name.empty()) continue;
      bool entry = (sym.st_other & kStoCudaEntry) != 0;
      if (!entry && have_shstr && sym.st_shndx != SHN_UNDEF && sym.st_shndx < SHN_LORESERVE) {
        Elf64_Shdr home;
        std::string_view home_name;
        if (section(sym.st_shndx, &home) && img.String(shstr.sh_offset, shstr.sh_size, home.sh_name, &home_name) &&
            home_name.size() == name.size() + 6 && home_name.substr(0, 6) == ".text." && home_name.substr(6) == name)
          entry = true;
      }
      if (entry && seen.emplace(name).second) names.emplace_back(name);
    }
  }
  if (!found_symtab) return Bad("no symbol table");
  return names;
}

std::vector<std::string> PrintableNames(const void* data, size_t size, size_t min_len) {
  std::vector<std::string> out;
  if (data == nullptr) return out;
  const char* p = static_cast<const char*>(data);
  std::string cur;
  std::unordered_set<std::string> seen;
  auto flush = [&] {
    if (cur.size() >= min_len && seen.insert(cur).second) out.push_back(cur);
    cur.clear();
  };
  for (size_t i = 0; i < size; ++i) {
    const char c = p[i];
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '.';
    if (ok) {
      cur.push_back(c);
    } else {
      flush();
    }
  }
  flush();
  return out;
}

}  // namespace twinscope::blocks
