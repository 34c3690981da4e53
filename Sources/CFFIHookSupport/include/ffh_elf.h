#ifndef FFH_ELF_H
#define FFH_ELF_H

// Reading the import tables (GOT entries) of the objects the dynamic loader has loaded.
// Swift cannot import <link.h> (dl_iterate_phdr, struct dl_phdr_info) or the ELF structures
// of <elf.h>, so the walk over program headers, the dynamic section and its relocation
// tables lives here; the Swift side decides what to hook.

#include <stddef.h>
#include <stdint.h>

/// One loaded object, as the dynamic loader lists it.
typedef struct {
    /// The path the loader knows it by, copied; "" for the main program.
    char *path;
    /// The difference between the object's link-time and run-time addresses (`l_addr`).
    uintptr_t base;
    /// The object's program headers, in its own mapped memory (valid while it stays loaded).
    const void *program_headers;
    /// How many program headers there are.
    uint16_t program_header_count;
    /// The lowest and the highest address (one past) of its loadable segments, copied while the
    /// loader's list was locked: readable after the object is unloaded, when its program
    /// headers are not.
    uintptr_t lowest, highest;
} ffh_elf_object;

/// What kind of relocation fills an import-table entry.
typedef enum {
    /// A PLT entry (`R_X86_64_JUMP_SLOT`): calls through the PLT; lazily bound unless the
    /// object was linked with `-z now` or `LD_BIND_NOW` is set.
    FFH_ELF_JUMP_SLOT = 1,
    /// A GOT entry (`R_X86_64_GLOB_DAT`): address-taken functions and `-fno-plt` calls;
    /// always bound when the object is loaded.
    FFH_ELF_GLOBAL_DATA = 2,
} ffh_elf_kind;

/// One import-table entry for a symbol.
typedef struct {
    /// The entry's run-time address (`l_addr + r_offset`).
    uintptr_t slot;
    /// The relocation that fills it.
    ffh_elf_kind kind;
    /// The symbol version the entry asks for (`GLIBC_2.2.5`), or NULL when unversioned;
    /// points into the object's string table (valid while it stays loaded).
    const char *version;
    /// The symbol's name, in the object's string table.
    const char *name;
} ffh_elf_entry;

/// A snapshot of the loaded objects, in the loader's order (the main program first), taken
/// with dl_iterate_phdr. Stores the count in `count`; free with ffh_elf_free_objects.
/// NULL (and a count of 0) when memory runs out.
ffh_elf_object *ffh_elf_objects(size_t *count);

/// How many objects the loader has unloaded since the process began (its `dlpi_subs`): while
/// it stays the same, an object listed before is the same object still (none was unloaded and
/// another loaded in its place). Where the loader does not count, every call returns a new
/// number.
uint64_t ffh_elf_unloads(void);

/// Whether `address` lies in the mapping of an object the loader has loaded now: 1 or 0, asked
/// of the loader's own lock-free table (`_dl_find_object`, glibc 2.35 and later: no lock, no
/// system call); -1 where it cannot be asked.
int ffh_elf_in_object(const void *address);

/// Frees a snapshot made by ffh_elf_objects.
void ffh_elf_free_objects(ffh_elf_object *objects, size_t count);

/// Keeps `object` loaded until ffh_elf_unpin: a dlopen(RTLD_NOLOAD) handle of it, or
/// NULL when it is no longer loaded at the address of the snapshot. Opening an object waits
/// for a dlopen in progress on another thread, so a pinned object is fully relocated.
void *ffh_elf_pin(const ffh_elf_object *object);

/// Releases a handle from ffh_elf_pin.
void ffh_elf_unpin(void *handle);

/// One instance of a loaded object: its link map and the range of its mapping, which tell it
/// from another object, or another copy of the same, mapped at its place later (as far as the
/// three tell: glibc may give a later copy the same link-map memory, but a copy at the same
/// place and of the same extent has the same layout).
typedef struct {
    uintptr_t map;
    uintptr_t start;
    uintptr_t end;
} ffh_elf_instance;

/// Whether a loaded object that the loader has finished loading holds `address`, looked up
/// without a lock (`_dl_find_object`): 1, with `*instance`; 0 when none does: memory of no
/// object, or of one being loaded (the loader relocates it and protects its RELRO pages
/// before it adds it to that lookup) or unloaded. A page's start finds the object whose range
/// begins later on that page.
int ffh_elf_settled_object(uintptr_t address, ffh_elf_instance *instance);

/// Changes the protection of `length` bytes at `page` to `protection`, only while `instance`
/// holds `page`: looked up and changed with the loader's list lock held (the one
/// dl_iterate_phdr holds), which glibc's dlclose holds from the unmapping of an object to its
/// removal from `_dl_find_object`'s data, so the object cannot be unloaded, and another mapped
/// at its place, between the look and the change. The lock is tried, not waited for (50 ms at
/// most: its holder may wait for a lock the caller holds). 1 when changed, 0 when another
/// instance or none holds the page now, -1 when mprotect failed, -2 when the lock stayed busy
/// (nothing changed: the caller gives the page to ``ffh_elf_lock_list`` and
/// ``ffh_elf_protect_instance_locked`` later). Without the lock's place
/// (ffh_elf_knows_list_lock), looks and changes without it.
int ffh_elf_protect_instance(uintptr_t page, size_t length, int protection, const ffh_elf_instance *instance);

/// Takes the loader's list lock, waiting for it (and the walk gate's read side, which a fork
/// takes the other side of): for a thread that holds no lock of the library's, which a holder
/// of the list lock may wait for.
void ffh_elf_lock_list(void);
/// Gives back what ``ffh_elf_lock_list`` took.
void ffh_elf_unlock_list(void);
/// ``ffh_elf_protect_instance`` between ``ffh_elf_lock_list`` and ``ffh_elf_unlock_list``, for a
/// change made late (the page lifted some time before): a page is made read-only only where the
/// object holding it now maps it read-only by its own program headers (its RELRO range, or a
/// segment without write permission). An object unloaded meanwhile and another file loaded at
/// its place may have the same link map, start and end (the loader reuses them), where its
/// page is writable data.
int ffh_elf_protect_instance_locked(uintptr_t page, size_t length, int protection, const ffh_elf_instance *instance);
/// ``ffh_elf_protect_instance_locked`` for a page still as the lift left it (readable and
/// writable, with its executable bit as `protection` has it): a page whose protection changed
/// since is its owner's, and left alone. 0 when nothing was changed.
int ffh_elf_restore_late(uintptr_t page, size_t length, int protection, const ffh_elf_instance *instance);

/// Notes a page waiting for SlotMemory's restorer (`protection` to give back, while `instance`
/// holds it), called under the lock that guards the restorer's list, which a fork holds
/// across: a fork's child (no restorer thread there) gives such pages their protection back
/// as it starts, with ``ffh_elf_restore_late`` (32 pages at most are noted). Returns 1 when
/// the page is noted, 0 when 32 others are. Needs ffh_elf_guard_walks_across_fork to have
/// been called.
int ffh_elf_note_waiting(uintptr_t page, size_t length, int protection, const ffh_elf_instance *instance);
/// Forgets a page noted by ``ffh_elf_note_waiting``; every page for 0.
void ffh_elf_forget_waiting(uintptr_t page);

/// Whether the loader's list lock was found at load (glibc's `_rtld_global`).
int ffh_elf_knows_list_lock(void);

/// Whether the loader's list lock is held by a thread that is not this process's: in a fork's
/// child, a thread of the parent held it (walking the list, or loading or unloading) as the
/// process forked, and nothing in the child will ever release it, so that a walk of the list
/// (`dl_iterate_phdr`) there waits for ever. 0 where the lock is not known.
int ffh_elf_list_lock_orphaned(void);

/// The object's DT_SONAME, or NULL; points into the object's string table.
const char *ffh_elf_soname(const ffh_elf_object *object);

/// Writes up to `capacity` of the object's JUMP_SLOT and GLOB_DAT entries for `symbol`
/// (any version; every symbol's when `symbol` is NULL) into `entries` and returns how many
/// there are in all.
size_t ffh_elf_find_entries(
    const ffh_elf_object *object, const char *symbol, ffh_elf_entry *entries, size_t capacity);

/// One object's JUMP_SLOT and GLOB_DAT entries by symbol name: its relocations read once, for
/// questions about many symbols (a group of a thousand symbols asks each object a thousand
/// times).
typedef struct ffh_elf_index ffh_elf_index;

/// Reads the object's relocations into a new index (empty for an object without a dynamic
/// symbol table); NULL when memory runs out. The object must stay loaded while it is used.
ffh_elf_index *ffh_elf_index_make(const ffh_elf_object *object);

/// As ffh_elf_index_make, keeping only the entries whose name's ffh_elf_name_hash has its bit
/// set in `filter`, `words` 64-bit words (a power of two; bit `hash % (64 * words)`): an index
/// for questions about a known set of names (a Bloom filter of one hash function), much
/// smaller, and empty for most objects. An index made so answers for the filter's names only.
/// Without a filter (NULL, or `words` not a power of two), every entry is kept.
ffh_elf_index *ffh_elf_index_make_filtered(const ffh_elf_object *object, const uint64_t *filter, size_t words);

/// As ffh_elf_index_make, keeping only the entries named by one of the `count` names of `names`
/// (compared whole): for questions about a few names, where hashing every entry's name for a
/// filter would cost more than the questions. The object's relocations are read once, however
/// many names. An index made so answers for those names only.
ffh_elf_index *ffh_elf_index_make_named(const ffh_elf_object *object, const char *const *names, size_t count);

/// How many entries an index holds (0 for NULL).
size_t ffh_elf_index_count(const ffh_elf_index *index);

/// Writes up to `capacity` of the index's entries from the `start`th on (in the order of the
/// object's tables), as ffh_elf_index_find does, and their names' hashes into `hashes`;
/// returns how many it wrote.
size_t ffh_elf_index_entries(const ffh_elf_index *index, size_t start, ffh_elf_entry *entries, uint32_t *hashes,
                             size_t capacity);

/// The hash of a symbol's name that ffh_elf_index_find takes (computed once for a question
/// put to many objects).
uint32_t ffh_elf_name_hash(const char *symbol);

/// Writes up to `capacity` of the indexed entries for `symbol`, whose ffh_elf_name_hash is
/// `hash` (any version, in the order of the object's tables), into `entries`, as
/// ffh_elf_find_entries does, and returns how many there are in all.
size_t ffh_elf_index_find(const ffh_elf_index *index, const char *symbol, uint32_t hash, ffh_elf_entry *entries,
                          size_t capacity);

/// Frees an index from ffh_elf_index_make (NULL is ignored).
void ffh_elf_index_free(ffh_elf_index *index);

/// Whether `address` lies in one of the object's loaded segments (`PT_LOAD`). Reads its program
/// headers: the object must be kept loaded (pinned) meanwhile; `lowest` and `highest` answer
/// for an object that may be gone.
int ffh_elf_contains(const ffh_elf_object *object, uintptr_t address);

/// Whether `address` lies in one of the object's executable segments (its own code, PLT
/// stubs included).
int ffh_elf_is_in_code(const ffh_elf_object *object, uintptr_t address);

/// Whether the word at `address` lies in a writable segment of the object outside its
/// PT_GNU_RELRO range: memory the loader leaves writable after relocation.
int ffh_elf_is_writable_data(const ffh_elf_object *object, uintptr_t address);

/// One entry of a loaded object's dynamic symbol table, in types Swift can read (it cannot
/// import `ElfW(Sym)`).
typedef struct {
    /// The symbol's name, in the object's string table (valid while it stays loaded).
    const char *name;
    /// Its run-time address: the object's base plus `st_value`.
    uintptr_t address;
    /// `st_size`; 0 when the object does not say.
    uint64_t size;
    /// `ELF64_ST_TYPE(st_info)`: STT_FUNC, STT_GNU_IFUNC, STT_OBJECT, ...
    uint8_t type;
} ffh_elf_symbol;

/// The object's own definition of `name` in its dynamic symbol table, looked up through its
/// hash table (DT_GNU_HASH, else DT_HASH) with the rules of the loader's unversioned lookup
/// (what dlsym matches): a defined global, weak or unique symbol, unversioned or of its default
/// version (a hidden `name@VERSION` is skipped). Returns 1 and fills `symbol`, else 0.
int ffh_elf_find_definition(const ffh_elf_object *object, const char *name, ffh_elf_symbol *symbol);

/// The dynamic symbol that dladdr1(RTLD_DL_SYMENT) matches to `address`: the one of greatest
/// value whose range holds it (or that starts there, when its size is 0). Returns 1 and fills
/// `symbol`, else 0. Swift cannot see dladdr1, a GNU extension.
int ffh_elf_symbol_at(uintptr_t address, ffh_elf_symbol *symbol);

/// A function an object exports: a defined `STT_FUNC` or `STT_GNU_IFUNC` entry of its dynamic
/// symbol table, global, weak or unique, of default or protected visibility.
typedef struct {
    ffh_elf_symbol symbol;
    /// 0 for a hidden version (`name@VERSION`, an older one kept for old binaries), which the
    /// loader binds only to callers that ask for that version; 1 otherwise.
    uint8_t is_default_version;
    /// 1 for a weak symbol (`STB_WEAK`), often the public alias of a function whose global
    /// name is the library's own (`__libc_malloc`); 0 for a global or unique one.
    uint8_t is_weak;
} ffh_elf_function;

/// Writes up to `capacity` of the functions the object exports into `functions`, in the order
/// of its dynamic symbol table (aliases and versions of one function each have an entry), and
/// returns how many there are in all. Reads the object's mapped dynamic symbol table: no file.
size_t ffh_elf_defined_functions(const ffh_elf_object *object, ffh_elf_function *functions, size_t capacity);

/// The functions of ffh_elf_defined_functions that start at `address` (a function's aliases
/// and versions), written as it writes them; returns how many there are in all.
size_t ffh_elf_functions_at(const ffh_elf_object *object, uintptr_t address, ffh_elf_function *functions,
                            size_t capacity);

/// Writes up to `capacity` of the places where the object's unwind table (its
/// `PT_GNU_EH_FRAME` segment, `.eh_frame_hdr`: one entry for each frame description) says code
/// begins, run-time addresses in ascending order, and returns how many there are in all: the
/// start of every function the compiler described for unwinding, its local ones and the parts
/// it split off (`.cold`) included, each an instruction boundary. 0 for an object without the
/// table or with a table in an encoding other than the linkers' own (32-bit offsets from the
/// table). Reads the object's mapped segment: no file.
size_t ffh_elf_unwind_starts(const ffh_elf_object *object, uintptr_t *starts, size_t capacity);

/// The load bias (`l_addr`) and dynamic section address (`l_ld`) of the loaded object whose
/// mappings hold `address` (dladdr1's link map). Returns 1, or 0 when no loaded object does.
int ffh_elf_object_at(uintptr_t address, uintptr_t *base, uintptr_t *dynamic);

/// The load bias (`l_addr`) and dynamic section address (`l_ld`) of the loaded object that
/// dlopen(`name`, RTLD_NOLOAD) names: a soname, a path, or a file the loader's search finds
/// to be a loaded one. Returns 1, or 0 when none is loaded; never loads one.
int ffh_elf_identify_loaded(const char *name, uintptr_t *base, uintptr_t *dynamic);

/// The address the dynamic loader binds `symbol` to for an object: the first definition in
/// the global scope (dlsym(RTLD_DEFAULT)), else in the scope of `handle` (an object opened
/// with RTLD_LOCAL). An indirect function (IFUNC, as glibc's string functions are) is
/// resolved to its implementation. NULL when nothing defines it. On x86-64 the lookups are
/// made as the object that holds the code at `inside` (through a `ret` of its own): glibc
/// records a dependency of the calling object on the object it finds, as its lazy binder does
/// for the object bound, and a dependency of this library's (the program's, or a preloaded
/// tracer's, which are never unloaded) kept the definition loaded for good, past the
/// `dlclose` that would have unloaded it. 0 for `inside` looks up as this library.
void *ffh_elf_resolve(const char *symbol, void *handle, uintptr_t inside);

/// The definition of `symbol` in the objects loaded after the one that holds the code at
/// `inside` (what `dlsym(RTLD_NEXT, symbol)` called from that object finds), NULL when none or
/// where that cannot be asked (off x86-64). A non-PIE program that takes a function's address
/// makes its own PLT entry the function's address for everyone, RTLD_DEFAULT's lookup
/// included: bound to that, the program's own entry would lead back to itself.
void *ffh_elf_resolve_after(const char *symbol, uintptr_t inside);

/// Sets a function that ffh_elf_resolve calls first, with the symbol (NULL: none): where a
/// test holds a walk, whose own calls no hook of the program's sees.
void ffh_elf_set_resolve_observer(void (*observer)(const char *symbol));

/// Atomically reads the word at `slot`, which the dynamic loader may be writing on another
/// thread (a lazily bound entry being bound).
uintptr_t ffh_elf_load(uintptr_t slot);

/// Atomically replaces the word at `slot` with `desired` if it holds `expected`; returns
/// whether it did; nothing is written, and no fault raised, where the word is unmapped or
/// read-only (see ffh_exchange_if_writable). Swift has no atomic on a raw address of
/// another object's memory without binding it to a type.
int ffh_elf_replace(uintptr_t slot, uintptr_t expected, uintptr_t desired);

/// Marks this thread as walking import tables (nested calls count): the walk itself calls
/// dlopen, which must not set off another walk from a hook that follows dlopen.
void ffh_elf_begin_walk(void);

/// Ends a mark made by ffh_elf_begin_walk.
void ffh_elf_end_walk(void);

/// Whether this thread is walking import tables.
int ffh_elf_is_walking(void);

/// Registers, on its first call only, `pthread_atfork` handlers that keep a fork from
/// happening while another thread walks (for 100 ms at most): a walk lists the loaded
/// objects with a loader lock held, which glibc does not reset in the child, whose next
/// `dlopen` would then wait for ever. Called after the hook registry registered its own
/// handlers, so that this prepare handler runs first, while walks can still finish.
void ffh_elf_guard_walks_across_fork(void);

/// Whether a fork now would take the gate those handlers keep at once: this thread is not
/// walking and no other thread holds the gate (for tests).
int ffh_elf_gate_is_open(void);

/// Counts a `dlopen` call starting on this thread (one a library's constructor makes while
/// another `dlopen` of the thread runs nests inside it).
void ffh_elf_begin_load(void);

/// Counts a `dlopen` call ending on this thread; returns whether it was the outermost, made
/// while the thread held none of the loader's locks on its own account.
int ffh_elf_end_load(void);

#endif
