"""Files shared between processes: a file the main process alone writes once migrated and
every process then reads, and a folder the main process removes that every process then
writes into again (MIG030's waits: rules/shared_files.py).

MIG030 makes every write main-only (`accelerator.save`, `if accelerator.is_main_process:`).
The reads are `torch.load(path)`, `load_state_dict(torch.load(path))`, `X.from_pretrained(
path)`, `np.load(path)`, `open(path)` to read, a listing of a folder files were written
into (`ImageFolder(root)`, `os.listdir(d)`, `glob.glob(...)`: folder_paths.py), in any
function of the program, or in a helper of one of its modules that is not joined
(`test_model(...)` of `models/tester.py` loading `./output/model_01.pkl`: the helper
library). A file is named by a path the two calls spell
alike (as Python reads them: line breaks and quotes aside), or by the same string constant (a name bound once to it, in the function or the
module). A read that runs once before the write (a resume before training), or in the other
branch of an `if`, needs nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from migrator.analysis.catalogue import effects, patterns
from migrator.analysis.effects import folder_paths
from migrator.analysis.effects.processes import DEAD, Processes
from migrator.analysis.model.hand_offs import foreign_callee
from migrator.analysis.model.helper_library import HelperLibrary
from migrator.analysis.model.origins import argument_for
from migrator.analysis.syntax.index import ModuleIndex, Scope, Statement
from migrator.source import Source

READ_CALLS = {"torch.load", "torch.jit.load", "numpy.load", "safetensors.torch.load_file",
              "pandas.read_csv", "json.load", "numpy.loadtxt", "pandas.read_json",
              "PIL.Image.open", "cv2.imread", "imageio.imread", "imageio.v2.imread",
              "matplotlib.pyplot.imread", "torchvision.io.read_image"}  # fmt: skip
FOLDER_WRITES = {"os.makedirs", "os.mkdir"}


@dataclass(eq=False)
class FileFlow:
    index: ModuleIndex
    source: Source
    processes: Processes
    library: HelperLibrary
    guarded: object  # guarded(site): a call of a helper that writes, made main-only (MIG030)

    def read_statements(self, waited: set[int]) -> list[Statement]:
        """The statements before which every process waits for a main-only write (outside
        the branches around the read); `waited`: ids of reads already waited for."""
        writes = main_writes(self)
        return reads(self, writes, waited) if writes else []

    def removal_statements(self) -> list[Statement]:
        """The statements after which every process waits for a main-only `shutil.rmtree(d)`
        before writing into `d` again."""
        return [
            outside_branches(site.statement, [])
            for site, text in removals(self)
            if written_again(self, site, text)
        ]


def main_writes(flow: FileFlow) -> dict[tuple, list]:
    """The files that code on every process wrote in the original and the main process alone
    writes now (MIG030 guards every write), by key, with the call sites that write them."""
    imports = flow.index.imports
    keys: dict[tuple, list] = {}  # key -> the call sites writing it
    for site in flow.index.calls():
        if flow.processes.scope_status(site.scope) == DEAD:
            continue
        effect = effects.effect_of(site.node, imports, effects.values_in(site.scope))
        qualified = imports.qualify(site.node.func) or ""
        helper = qualified in imports.helper_effects  # a project helper whose body writes
        if helper or (effect is None and flow.guarded(site)):
            paths = _helper_paths(flow, site)  # `utils.keep(model, CHECKPOINT)`
        elif effect is None or effect.kind != "write" or qualified in FOLDER_WRITES:
            continue
        else:
            paths = [_written_path(site.node, qualified)]
        for path in paths:
            for key in _written_keys(flow, site.scope, path) if path is not None else ():
                keys.setdefault(key, []).append(site)
    for site, key in _through_parameters(flow, "write"):  # `save_model(name)` of this file
        keys.setdefault(key, []).append(site)
    return keys


def _written_keys(flow: FileFlow, scope: Scope, path: ast.expr, under: bool = False) -> list:
    """The keys of a written file (none where `under`: the path names its folder), then
    ("folder", key) for each folder it lies in (folder_paths.py)."""
    imports = flow.index.imports
    folders = folder_paths.folders_above(
        path, spelling, _resolver(flow, scope), imports.qualify, is_folder=under
    )
    own = [] if under else [_key(flow, scope, path)]
    return [*own, *(("folder", *key) for key in sorted(folders))]


def _read_keys(flow: FileFlow, scope: Scope, folder: ast.expr) -> list:
    """("folder", key) for each key a listed folder is known by (folder_paths.py)."""
    keys = folder_paths.read_keys(
        folder, spelling, _resolver(flow, scope), flow.index.imports.qualify
    )
    return [("folder", *key) for key in sorted(keys)]


def _resolver(flow: FileFlow, scope: Scope):
    """The value a name is bound to once, where it is used or in the module."""

    def resolve(name: ast.Name) -> ast.expr | None:
        for where in (scope, flow.index.module_scope):
            bindings = where.assigns(name.id)
            if bindings:
                single = len(bindings) == 1 and not bindings[0].unpacked
                return bindings[0].value if single and bindings[0].kind == "assign" else None
        return None

    return resolve


def _through_parameters(flow: FileFlow, kind: str):
    """(call site, key) of each call of a function of this file whose body writes (reads)
    the file its parameter names (`def save_model(path): torch.save(..., path)`): the file
    is the argument of that call, and the call is where it is written (read)."""
    imports = flow.index.imports
    graph = flow.processes.graph
    for site in flow.index.calls():
        callee = graph.callee(site)
        if callee is None or callee.kind != "function":
            continue
        if kind == "read" and not flow.processes.runs_on_every_process(site.statement):
            continue
        for parameter, how in _parameter_files(callee, imports, kind):
            argument = argument_for(site.node, callee, parameter)
            if argument is None:
                continue
            if how == "lists":
                keys = _read_keys(flow, site.scope, argument)
            elif kind == "write":
                keys = _written_keys(flow, site.scope, argument, under=how == "under")
            else:
                keys = [_key(flow, site.scope, argument)]
            for key in keys:
                yield site, key


def _parameter_files(function: Scope, imports, kind: str) -> list[tuple[str, str]]:
    """The parameters of `function` its own calls write (read) as a file's path ("file"), or
    write files under ("under": `save_path + "/" + name`), or list ("lists": `os.listdir(d)`)."""
    params = {p for p in function.params if not function.assigns(p)}
    found = []
    for site in function.calls:
        qualified = imports.qualify(site.node.func) or ""
        if kind == "write":
            effect = effects.effect_of(site.node, imports, effects.values_in(function))
            path = _written_path(site.node, qualified) if effect is not None and (
                effect.kind == "write") else None  # fmt: skip
            under = path is not None and folder_paths.under_parameter(path, params, imports.qualify)
            if under:
                found.append((under, "under"))
        else:
            path = _read_path(site.node, imports)
            listed = folder_paths.folder_read(site.node, imports.qualify)
            if isinstance(listed, ast.Name) and listed.id in params:
                found.append((listed.id, "lists"))
        if isinstance(path, ast.Name) and path.id in params:
            found.append((path.id, "file"))
    return found


def _helper_paths(flow: FileFlow, site) -> list[ast.expr]:
    """The paths a writing helper of the program is handed: the arguments its body writes to
    (its library module's), or, unseen, the arguments that look like paths (a string, a name
    bound to one, an f-string)."""
    imports = flow.index.imports
    call = site.node
    found = flow.library.called(call, imports, foreign_callee(call, imports))
    arguments = [*call.args, *(k.value for k in call.keywords)]
    if found is None:
        return [a for a in arguments if isinstance(a, (ast.Constant, ast.Name, ast.JoinedStr))]
    module, function = found
    params = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    paths = []
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        effect = effects.effect_of(node, module.imports)
        qualified = module.imports.qualify(node.func) or ""
        written = _written_path(node, qualified) if effect is not None else None
        if isinstance(written, ast.Name) and written.id in params:
            position = params.index(written.id)
            keyword = next((k.value for k in call.keywords if k.arg == written.id), None)
            paths.append(call.args[position] if position < len(call.args) else keyword)
        elif _constant(written, function) is not None:
            paths.append(ast.Constant(_constant(written, function)))
    return [p for p in paths if p is not None]


def _written_path(call: ast.Call, qualified: str) -> ast.expr | None:
    if isinstance(call.func, ast.Attribute) and call.func.attr == "save_pretrained":
        args = patterns.positional(call)
        return args[0].value if args else patterns.keyword(call, "save_directory")
    if qualified in ("shutil.rmtree", "os.remove", "os.unlink", "os.rmdir"):
        return None  # a removal: nothing to read back
    return effects.path_argument(call, qualified)


def reads(flow: FileFlow, writes: dict, waited: set[int]) -> list[Statement]:
    """The statements (outside their branches) of the reads of `writes` on every process:
    the reading call's own, or the call of a library helper whose body reads."""
    imports = flow.index.imports
    found: dict[int, Statement] = {}
    for site in flow.index.calls():
        if id(site.node) in waited or not flow.processes.runs_on_every_process(site.statement):
            continue
        path = _read_path(site.node, imports)
        key = _key(flow, site.scope, path) if path is not None else None
        if key is None or key not in writes:
            key = _helper_read(flow, site, writes)
        listed = folder_paths.folder_read(site.node, imports.qualify)
        keys = [key, *(_read_keys(flow, site.scope, listed) if listed is not None else ())]
        lines = [
            w.node.lineno
            for found in keys
            for w in writes.get(found, [])
            if not _exclusive(site.statement, w.node.lineno) and not _before(site, w)
        ]
        if lines:
            statement = outside_branches(site.statement, lines)
            if flow.processes.runs_on_every_process(statement):
                found.setdefault(id(statement.node), statement)
    for site, key in _through_parameters(flow, "read"):  # `load_model(name)` of this file
        lines = [w.node.lineno for w in writes.get(key, []) if w is not site
                 and not _exclusive(site.statement, w.node.lineno) and not _before(site, w)]  # fmt: skip
        if lines and id(site.node) not in waited:
            statement = outside_branches(site.statement, lines)
            if flow.processes.runs_on_every_process(statement):
                found.setdefault(id(statement.node), statement)
    return list(found.values())


def _before(read, write) -> bool:
    """Does the read run before the write, once: earlier in the same function, with no loop
    around both (`if os.path.exists(path): resume` before training saves to `path`)?"""
    if read.scope is not write.scope or read.node.lineno >= write.node.lineno:
        return False
    return not any(loop.contains(write.loop) for loop in _loops(read.loop))


def _loops(loop) -> list:
    return [loop, *loop.ancestors()] if loop is not None else []


def _exclusive(statement: Statement, line: int) -> bool:
    """Is the write at `line` in the other branch of an `if` around the read (`if train:
    ... save` / `else: ... load`)? One run does one or the other."""
    for outer in statement.chain()[:-1]:
        node = outer.node
        if not isinstance(node, ast.If) or not node.orelse:
            continue
        in_body = node.body[0].lineno <= line <= node.body[-1].end_lineno
        in_else = node.orelse[0].lineno <= line <= node.orelse[-1].end_lineno
        read_in_body = node.body[0].lineno <= statement.node.lineno <= node.body[-1].end_lineno
        if (in_body and not read_in_body) or (in_else and read_in_body):
            return True
    return False


def _read_path(call: ast.Call, imports) -> ast.expr | None:
    qualified = imports.qualify(call.func) or ""
    method = call.func.attr if isinstance(call.func, ast.Attribute) else None
    if qualified in READ_CALLS or method == "from_pretrained":
        args = patterns.positional(call)
        return args[0].value if args else None
    if qualified in effects.OPEN_CALLS and not effects.writing_mode(call):
        args = patterns.positional(call)
        return args[0].value if args else None
    return None


def _helper_read(flow: FileFlow, site, writes: dict) -> tuple | None:
    """The key of a written file that a helper of the program's library reads (a constant
    path in its body, or one bound once to a constant there)."""
    imports = flow.index.imports
    found = flow.library.called(site.node, imports, foreign_callee(site.node, imports))
    if found is None:
        return None
    module, function = found
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            path = _read_path(node, module.imports)
            value = _constant(path, function) or _constant(path, module.tree)
            if value is not None and ("const", value) in writes:
                return ("const", value)
    return None


def _key(flow: FileFlow, scope: Scope, path: ast.expr) -> tuple | None:
    """("const", value) for a string constant or a name bound once to one (here or in the
    module), else ("text", the path as written)."""
    value = patterns.string_value(path)
    if value is None and isinstance(path, ast.Name):
        module = flow.index.module_scope
        for where in (scope, module):
            bindings = where.assigns(path.id)
            values = {patterns.string_value(b.value) for b in bindings if not b.unpacked}
            if bindings and len(values) == 1 and None not in values:
                value = values.pop()
                break
    if value is not None:
        return ("const", value)
    return ("text", spelling(path))


def spelling(path: ast.expr) -> str:
    """The path as Python reads it: one spelling whatever the line breaks, indentation and
    quotes (`os.path.join(\n    self.out, 'm.pth')` is `os.path.join(self.out, "m.pth")`)."""
    return ast.unparse(path)


def _constant(path: ast.expr | None, where: ast.AST) -> str | None:
    value = patterns.string_value(path)
    if value is not None or not isinstance(path, ast.Name):
        return value
    values = {
        patterns.string_value(node.value)
        for node in ast.walk(where)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == path.id for t in node.targets)
    }
    return values.pop() if len(values) == 1 else None


def removals(flow: FileFlow):
    """(site, path key) of each `shutil.rmtree(d)` that runs on the main process only once
    migrated (MIG030 guards it, or the original did)."""
    imports = flow.index.imports
    for site in flow.index.calls():
        if imports.qualify(site.node.func) != "shutil.rmtree" or not site.node.args:
            continue
        if flow.processes.scope_status(site.scope) == DEAD:
            continue
        yield site, spelling(site.node.args[0])


def written_again(flow: FileFlow, removal, text: str) -> bool:
    """Does code on every process write into the removed folder after the removal, in the
    same function (`os.makedirs(d, exist_ok=True)`, `open(os.path.join(d, ...), "w")`)?"""
    imports = flow.index.imports
    for site in removal.scope.calls:
        if site.node.lineno <= removal.node.end_lineno:
            continue
        if not flow.processes.runs_on_every_process(site.statement):
            continue
        qualified = imports.qualify(site.node.func) or ""
        writes = (
            qualified in FOLDER_WRITES
            or site.method == "mkdir"
            or (effects.effect_of(site.node, imports) is not None)
        )
        if writes and any(
            spelling(node) == text
            for arg in site.node.args
            for node in ast.walk(arg)
            if isinstance(node, ast.expr)
        ):
            return True
    return False


def outside_branches(statement: Statement, written: list[int]) -> Statement:
    """The statement, or the outermost `if` (or `try`) around it within its loop or function:
    processes may decide a test differently (a file one has removed), a wait inside would
    hang the others. Not past `if __name__ == "__main__":` nor an `if` holding a write of the
    file (`written`: its lines): the wait must follow the write."""
    while statement.block.parent is not None:
        parent = statement.block.parent
        node = parent.node
        if not isinstance(node, (ast.If, ast.Try)) or _main_guard(node):
            break
        if any(node.lineno <= line <= node.end_lineno for line in written):
            break
        statement = parent
    return statement


def _main_guard(node: ast.AST) -> bool:
    """`if __name__ == "__main__":`"""
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Compare) and any(
        isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(test)
    )
