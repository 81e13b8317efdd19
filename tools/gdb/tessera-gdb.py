# tessera-gdb.py — Tessera's fibers in gdb.
#
#   info tessera-fibers        every live fiber: id, state, name, what it waits for
#   tessera-fiber N [COMMAND]  runs COMMAND (default: bt) with the selected thread's
#                              registers set to parked fiber N's saved context,
#                              then puts them back
#
# Loaded automatically from gdb's auto-load directory (the program carries a
# .debug_gdb_scripts entry naming this file), or by hand with `source`. It reads
# the process's memory through the table sched/debugger.cpp exports, so it needs
# no debug information. tessera-fiber needs a live process (it sets registers).
import struct

import gdb

_KNOWN_VERSION = 1
_SPAWN_TEMPLATES = ("tessera::spawn<", "tessera::fiber::fiber<", "tessera::runtime::spawn<",
                    "tessera::runtime::submit<")
_PARKED_STATES = (-1, -2)
_LAYOUT_FIELDS = (
    "version", "id", "listed_in", "state", "ctx", "name", "name_size", "wait_kind",
    "wait_object", "wait_detail", "runner", "created_at", "r12", "r13", "r14", "r15",
    "rbx", "rbp", "rip", "frame_size",
)


def _address_of(symbol):
    return int(gdb.parse_and_eval("(unsigned long)&%s" % symbol))


def _read(addr, size):
    return gdb.selected_inferior().read_memory(addr, size).tobytes()


def _u64(addr):
    return struct.unpack("<Q", _read(addr, 8))[0]


def _i64(addr):
    return struct.unpack("<q", _read(addr, 8))[0]


def _i32(addr):
    return struct.unpack("<i", _read(addr, 4))[0]


def _cstring(addr, limit=96):
    if addr == 0:
        return None
    raw = _read(addr, limit)
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _layout():
    try:
        base = _address_of("tessera_debug_layout")
    except gdb.error:
        raise gdb.GdbError("tessera: this program has no Tessera runtime (no tessera_debug_layout)")
    version = _u64(base)
    if version != _KNOWN_VERSION:
        raise gdb.GdbError("tessera: layout version %d, this script knows %d: use the script "
                           "installed with the library the program was built with"
                           % (version, _KNOWN_VERSION))
    return {name: _u64(base + 8 * i) for i, name in enumerate(_LAYOUT_FIELDS)}


class _Fiber:
    def __init__(self, addr, lay):
        self.addr = addr
        self.id = _u64(addr + lay["id"])
        self.runtime = _u64(addr + lay["listed_in"])
        self.state = _i32(addr + lay["state"])
        self.ctx = _u64(addr + lay["ctx"])
        self.name = _read(addr + lay["name"], lay["name_size"]).split(b"\0", 1)[0].decode(
            "utf-8", "replace")
        self.kind = _cstring(_u64(addr + lay["wait_kind"]))
        self.object = _u64(addr + lay["wait_object"])
        self.detail = _i64(addr + lay["wait_detail"])
        self.runner = _read(addr + lay["runner"], 1) != b"\0"
        self.created_at = _u64(addr + lay["created_at"])

    @property
    def parked(self):
        return self.state in _PARKED_STATES

    def waits_for(self):
        if self.kind is None:
            return ""
        if self.detail >= 0 and self.kind.startswith("socket"):
            return "%s fd %d" % (self.kind, self.detail)
        if self.detail >= 0:
            return "%s %d" % (self.kind, self.detail)
        if self.object:
            return "%s 0x%x" % (self.kind, self.object)
        return self.kind


def _fibers():
    lay = _layout()
    table = _u64(_address_of("tessera_debug_records"))
    count = _u64(_address_of("tessera_debug_record_count"))
    out = []
    for i in range(count):
        fiber = _Fiber(_u64(table + 8 * i), lay)
        if fiber.runtime != 0:
            out.append(fiber)
    return lay, sorted(out, key=lambda f: f.id)


def _symbol(pc):
    if pc == 0:
        return ""
    # The spawn templates (tessera/runtime.h) are inlined into their caller:
    # the first function out from the innermost that is not one is the user's.
    block = gdb.current_progspace().block_for_pc(pc - 1)
    while block is not None:
        if block.function is not None and not block.function.print_name.startswith(
                _SPAWN_TEMPLATES):
            return block.function.print_name
        block = block.superblock
    sym = gdb.execute("info symbol 0x%x" % (pc - 1), to_string=True).strip()
    return sym.split(" in section")[0] if "No symbol" not in sym else "0x%x" % pc


class InfoTesseraFibers(gdb.Command):
    """List Tessera's live fibers: id, state, name, what each waits for, where it was created."""

    def __init__(self):
        super().__init__("info tessera-fibers", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        _, fibers = _fibers()
        gdb.write("%d fibers\n" % len(fibers))
        gdb.write("  %-6s %-9s %-24s %-40s %s\n" % ("Id", "State", "Name", "Waits for", "Created at"))
        for f in fibers:
            state = "parked" if f.parked else "runnable"
            if f.runner:
                state += "*"
            gdb.write("  %-6d %-9s %-24s %-40s %s\n" % (
                f.id, state, '"%s"' % f.name if f.name else "", f.waits_for(),
                _symbol(f.created_at)))


class TesseraFiber(gdb.Command):
    """tessera-fiber N [COMMAND]: run COMMAND (default bt) in parked fiber N's context."""

    _REGS = ("rip", "rsp", "rbp", "rbx", "r12", "r13", "r14", "r15")

    def __init__(self):
        super().__init__("tessera-fiber", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        words = arg.split(None, 1)
        if not words:
            raise gdb.GdbError("usage: tessera-fiber N [COMMAND]")
        want = int(words[0], 0)
        command = words[1] if len(words) > 1 else "bt"
        lay, fibers = _fibers()
        match = [f for f in fibers if f.id == want]
        if not match:
            raise gdb.GdbError("tessera: no live fiber %d (see info tessera-fibers)" % want)
        fiber = match[0]
        if not fiber.parked:
            raise gdb.GdbError("tessera: fiber %d is not parked: if it runs, it is the stack of "
                               "the thread that runs it" % want)
        sp = fiber.ctx
        values = {
            "rip": _u64(sp + lay["rip"]),
            "rsp": sp + lay["frame_size"],
            "rbp": _u64(sp + lay["rbp"]),
            "rbx": _u64(sp + lay["rbx"]),
            "r12": _u64(sp + lay["r12"]),
            "r13": _u64(sp + lay["r13"]),
            "r14": _u64(sp + lay["r14"]),
            "r15": _u64(sp + lay["r15"]),
        }
        gdb.newest_frame().select()
        saved = {r: int(gdb.parse_and_eval("(unsigned long)$%s" % r)) for r in self._REGS}
        try:
            for r in self._REGS:
                gdb.execute("set $%s = 0x%x" % (r, values[r]), to_string=True)
            gdb.write('fiber %d%s [%s]\n' % (fiber.id, ' "%s"' % fiber.name if fiber.name else "",
                                             fiber.waits_for() or "parked"))
            gdb.execute(command, from_tty)
        finally:
            gdb.newest_frame().select()
            for r in self._REGS:
                gdb.execute("set $%s = 0x%x" % (r, saved[r]), to_string=True)


InfoTesseraFibers()
TesseraFiber()
