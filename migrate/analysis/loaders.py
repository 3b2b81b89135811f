"""Finds the training DataLoaders, the step loops that iterate them and the epoch loops around
those, so the sampler can be swapped and `set_epoch` called where each epoch starts.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import Binding, CallSite, Loop, Scope, ScriptIndex, descendants, spell
from migrate.analysis.sites import EpochLoop, LoaderSite
from migrate.analysis.syntax import contains
from migrate.analysis.training import BUILTIN_NAMES, callee_scope, caller_arguments, callers_of

DATA_LOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
EVALUATION_WORDS = ("val", "test", "eval", "dev")


def data_loader_calls(index: ScriptIndex) -> list[CallSite]:
    return index.calls_named(*DATA_LOADERS)


def step_loops(index: ScriptIndex, training: set[str], backward_scopes: set[str]) -> list[Loop]:
    """Innermost `for` loops whose body runs backward, directly or through a training call."""
    found: list[Loop] = []
    for loop in index.loops:
        if not isinstance(loop.node, cst.For) or loop.place.scope.name not in training:
            continue
        if _runs_training(index, loop) and not any(  # a `while` of micro-steps inside is part of the step
            inner is not loop and isinstance(inner.node, cst.For) and _runs_training(index, inner)
            for inner in _loops_below(index, loop)
        ):
            found.append(loop)
    return found


def _loops_below(index: ScriptIndex, outer: Loop) -> list[Loop]:
    """The loops inside `outer`, in its own function."""
    below = index.derived("loops_below", lambda: _loops_by_outer(index))
    return below.get(outer.node, [])


def _loops_by_outer(index: ScriptIndex) -> dict[cst.CSTNode, list[Loop]]:
    below: dict[cst.CSTNode, list[Loop]] = {}
    for loop in index.loops:
        for outer in loop.place.loops:
            below.setdefault(outer, []).append(loop)
    return below


def calls_in_loop(index: ScriptIndex, loop: cst.For | cst.While) -> list[CallSite]:
    """The calls inside a loop (in its own function), in source order."""
    return index.derived("calls_in_loop", lambda: _calls_by_loop(index)).get(loop, [])


def _calls_by_loop(index: ScriptIndex) -> dict[cst.CSTNode, list[CallSite]]:
    by_loop: dict[cst.CSTNode, list[CallSite]] = {}
    for call in index.calls:
        for loop in call.place.loops:
            by_loop.setdefault(loop, []).append(call)
    return by_loop


def _runs_training(index: ScriptIndex, loop: Loop) -> bool:
    """One pass of the loop is one training step: backward runs in its body, or in a function it
    calls that runs backward once (not in a loop of its own, which would be the step loop)."""
    known: dict[cst.CSTNode, bool] = index.memo("runs_training")
    if loop.node not in known:
        known[loop.node] = any(_is_backward(call) or _calls_backward_once(index, call) for call in calls_in_loop(index, loop.node))
    return known[loop.node]


def _calls_backward_once(index: ScriptIndex, call: CallSite) -> bool:
    """The call runs a function of this file that runs backward outside any loop of its own."""
    callee = callee_scope(index, call)
    return callee is not None and callee in index.derived("backward_once", lambda: _scopes_with_backward_once(index))


def _scopes_with_backward_once(index: ScriptIndex) -> set[Scope]:
    return {call.place.scope for call in index.calls if _is_backward(call) and not call.place.loops}


def _is_backward(call: CallSite) -> bool:
    return isinstance(call.node.func, cst.Attribute) and call.node.func.attr.value == "backward"


def loader_spelling(index: ScriptIndex, loop: Loop) -> str | None:
    """What a step loop iterates, seen through enumerate/tqdm/zip and `pbar = tqdm(loader)`;
    None for a count (`range(args.steps)`): its names are bounds, not data."""
    if _counts(index, loop):
        return None
    candidates = [n for n in loop.iter_names if _is_value_name(index, n)]
    if not candidates:
        return None
    name = candidates[0]
    for binding in index.bindings_of_in(name, loop.place.scope):
        if isinstance(binding.value, cst.Call):
            qualified = index.qualify(binding.value.func) or ""
            if qualified.split(".")[-1] == "tqdm":
                inner = [spell(a.value) for a in binding.value.args if a.keyword is None]
                if inner and inner[0]:
                    return inner[0]
    return name


COUNTERS = ("range", "tqdm.trange", "tqdm.auto.trange", "tqdm.tqdm.trange", "itertools.count")


def _counts(index: ScriptIndex, loop: Loop) -> bool:
    """`for step in range(n)` / `enumerate(range(n))` / `tqdm(range(n))`: the loop counts steps."""
    node = loop.node
    if not isinstance(node, cst.For):
        return False
    value = node.iter
    while isinstance(value, cst.Call):
        qualified = index.qualify(value.func) or ""
        if qualified in COUNTERS or qualified.endswith(".trange"):
            return True
        positional = [a for a in value.args if a.keyword is None]
        if qualified not in ("enumerate",) and not qualified.endswith("tqdm") or not positional:
            return False
        value = positional[0].value
    return False


def _is_value_name(index: ScriptIndex, name: str) -> bool:
    head = name.split(".")[0]
    if head == "self":
        return True
    return head not in index.imports and head not in BUILTIN_NAMES and head not in index.functions and head not in index.classes


def training_loader_names(index: ScriptIndex, loops: list[Loop]) -> set[str]:
    """Every spelling a training loader goes by: in the step loop's scope and in its callers, also
    when the loop draws batches with `next()` from `iter(loader)`, `cycle(loader)` or a generator
    of this file that loops over the loader (`infinite(loader)`)."""
    known = index.memo("training_loader_names")  # asked again by steps, once per loader
    key = tuple(loop.node for loop in loops)
    if key not in known:
        known[key] = frozenset(_training_loader_names(index, loops))
    return set(known[key])


def _training_loader_names(index: ScriptIndex, loops: list[Loop]) -> set[str]:
    names: set[str] = set()
    starts: list[tuple[str, Scope]] = []
    for loop in loops:
        name = loader_spelling(index, loop)
        if name is not None:
            starts.append((name, loop.place.scope))
        starts.extend(_drawn_with_next(index, loop))
    for name, scope in starts:
        for source, source_scope in [(name, scope), *_iterator_sources(index, name, scope)]:
            names |= _through_callers(index, source, source_scope)
    return names


def _through_callers(index: ScriptIndex, name: str, scope: Scope) -> set[str]:
    names = {name}
    for _ in range(4):
        callers = caller_arguments(index, scope, name)
        if not callers:
            break
        name, scope, _call = callers[0]
        names.add(name)
        names |= {source for source, _scope in _iterator_sources(index, name, scope)}
    if name.startswith("self."):
        names |= _constructor_sources(index, scope, name)
    return names


NEXT_METHODS = ("next", "__next__")
ITERATOR_WRAPPERS = ("iter", "itertools.cycle")


def _drawn_with_next(index: ScriptIndex, loop: Loop) -> list[tuple[str, Scope]]:
    """`x, y = next(batches)` in the loop body, or in a function of this file the body calls."""
    inside = calls_in_loop(index, loop.node)
    callees = {c for c in (callee_scope(index, call) for call in inside) if c}
    candidates = {id(call): call for call in inside}
    for callee in callees:
        candidates.update((id(call), call) for call in index.calls_from(callee))
    found: list[tuple[str, Scope]] = []
    for call in sorted(candidates.values(), key=index.call_position):
        drawn = _next_target(call.node)
        if drawn is not None and not _evaluates(index, call, drawn):
            found.append((drawn, call.place.scope))
    return found


def _evaluates(index: ScriptIndex, call: CallSite, drawn: str) -> bool:
    """A batch drawn for evaluation: under `torch.no_grad()` / `inference_mode()`, or from an
    iterator named like one (`next(val_iter)`)."""
    if any(word in drawn.lower() for word in EVALUATION_WORDS):
        return True
    for stmt in index.enclosing_statements(call.place.stmt):
        if isinstance(stmt, cst.With) and any(
            isinstance(item.item, cst.Call) and (index.qualify(item.item.func) or "").endswith(("no_grad", "inference_mode"))
            for item in stmt.items
        ):
            return True
    return False


def _next_target(call: cst.Call) -> str | None:
    """`next(it)` / `it.next()` / `it.__next__()` -> "it"."""
    if isinstance(call.func, cst.Name) and call.func.value == "next" and call.args:
        return spell(call.args[0].value)
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in NEXT_METHODS and not call.args:
        return spell(call.func.value)
    return None


def _iterator_sources(index: ScriptIndex, name: str, scope: Scope) -> list[tuple[str, Scope]]:
    """What an iterator is made from: `it = iter(loader)`, `cycle(loader)`, `infinite(loader)`."""
    found: list[tuple[str, Scope]] = []
    for binding in index.bindings_of(name):
        if not isinstance(binding.value, cst.Call):
            continue
        same_class = name.startswith("self.") and binding.place.scope.class_name == scope.class_name
        if binding.place.scope is not scope and not same_class:
            continue
        call = binding.value
        positional = [a for a in call.args if a.keyword is None and not a.star]
        source = spell(positional[0].value) if positional else None
        if source is None:
            continue
        helper = index.functions.get(spell(call.func) or "")
        if (index.qualify(call.func) or "") in ITERATOR_WRAPPERS or (helper is not None and _yields_from_first_parameter(helper)):
            found.append((source, binding.place.scope))
    return found


def _yields_from_first_parameter(helper: Scope) -> bool:
    """A generator over its first parameter: `def infinite(loader): while True: for b in loader: yield b`,
    or `... while True: yield from loader`."""
    if not helper.params or not isinstance(helper.node, cst.FunctionDef):
        return False
    first = helper.params[0]

    def names_first(node: cst.CSTNode) -> bool:
        return contains(node, lambda m: isinstance(m, cst.Name) and m.value == first)

    yields = contains(helper.node, lambda n: isinstance(n, cst.Yield))
    loops_over = contains(helper.node, lambda n: isinstance(n, cst.For) and names_first(n.iter))
    yields_from = contains(helper.node, lambda n: isinstance(n, cst.From) and names_first(n.item))
    return yields and (loops_over or yields_from)


def _drawn_through_wrapper(index: ScriptIndex, call: CallSite, training_names: set[str]) -> bool:
    """`batches = infinite(DataLoader(...))` / `iter(DataLoader(...))` / `cycle(...)`, where the step
    loop draws from `batches`: the loader made in place feeds training."""
    stmt = call.place.stmt
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if not isinstance(small, cst.Assign) or not isinstance(small.value, cst.Call):
            continue
        wrapper = small.value
        positional = [a for a in wrapper.args if a.keyword is None and not a.star]
        if not positional or positional[0].value is not call.node:
            continue
        helper = index.functions.get(spell(wrapper.func) or "")
        wraps = (index.qualify(wrapper.func) or "") in ITERATOR_WRAPPERS or (
            helper is not None and _yields_from_first_parameter(helper))
        if wraps and any(spell(t.target) in training_names for t in small.targets):
            return True
    return False


def _constructor_sources(index: ScriptIndex, scope: Scope, attribute: str) -> set[str]:
    """`self.train_data = train_data` in `__init__` -> what callers pass as train_data."""
    sources: set[str] = set()
    for binding in index.bindings_of_in_class(attribute, scope.class_name):
        if binding.value is None:
            continue
        param = spell(binding.value)
        if param is not None and param in binding.place.scope.params:
            sources |= {spelled for spelled, _s, _c in caller_arguments(index, binding.place.scope, param)}
    return sources


def find_loaders(index: ScriptIndex, training_names: set[str], loops: list[Loop] | None = None) -> list[LoaderSite]:
    """The DataLoader calls that feed training (to shard); evaluation loaders are left alone.

    A loader is training when the step loop is traced to it (by name, iterated in the loop, or
    made in place inside the iterator the loop draws from: `infinite(DataLoader(...))`). Only when
    the loop cannot be traced to anything does a shuffling loader count, and then not one named
    like an evaluation one nor one a function of this file builds and loops over without a
    backward (`evaluate()`): a loader that only feeds evaluation is never sharded in place of a
    training loader the tool could not see.
    """
    named = [(call, _bound_names(index, call)) for call in data_loader_calls(index)]
    iterated = {id(loop.node.iter) for loop in loops or () if isinstance(loop.node, cst.For)}
    traced = [
        LoaderSite(call=call, spelling=names[0] if names else None)
        for call, names in named
        if set(names) & training_names or _iterated_directly(index, call, iterated)
        or _drawn_through_wrapper(index, call, training_names)
    ]
    if traced or untraced_source(index, training_names) is not None:
        return _in_the_training_scope(index, traced, loops or [], iterated)
    return [
        LoaderSite(call=call, spelling=names[0] if names else None)
        for call, names in named
        if _shuffles(call) and not any(w in (names[0] if names else "").lower() for w in EVALUATION_WORDS)
        and not _feeds_only_evaluation(index, call, names)
    ]


def _in_the_training_scope(index: ScriptIndex, traced: list[LoaderSite], loops: list[Loop],
                           iterated: set[int]) -> list[LoaderSite]:
    """`traced` less a loader matched by name only where another loader of that name is bound in the
    scope the step loop reads it from: `evaluate()`'s own `loader = DataLoader(test_set, ...)` is
    not `train()`'s `loader`. Names alone decide when no loader of the name is found so."""
    reads = loader_reads(index, loops)
    fed = [s for s in traced if bound_where_read(index, s.call, reads)]
    fed_names = {name for s in fed for name in loader_names(index, s.call)}
    def stays(site: LoaderSite) -> bool:
        if site in fed or _iterated_directly(index, site.call, iterated):
            return True
        return not fed_names.intersection(loader_names(index, site.call))
    return [site for site in traced if stays(site)]


def _feeds_only_evaluation(index: ScriptIndex, call: CallSite, names: list[str]) -> bool:
    """A loader a function builds for itself and only loops over, where nothing runs backward,
    neither the function nor one it calls: `def evaluate(model, data): loader = DataLoader(...);
    for x, y in loader: ...`. A loader returned or handed to a call may feed training elsewhere."""
    scope = call.place.scope
    if scope.is_module or not names or len(names) != len(index.targets_of(call.node)):
        return False
    if not all(_only_iterated(scope.node, name) for name in names):
        return False
    calls = index.calls_from(scope)
    callees = {c for c in (callee_scope(index, call) for call in calls) if c is not None}
    return not any(_is_backward(call) for callee in callees for call in index.calls_from(callee)) \
        and not any(_is_backward(call) for call in calls)


def _only_iterated(node: cst.CSTNode, name: str) -> bool:
    """Every read of `name` under `node` is in the iterable of a `for` or a comprehension (the
    one binding apart)."""
    def count(root: cst.CSTNode) -> int:
        return sum(1 for n in descendants(root) if isinstance(n, cst.Name) and n.value == name)

    iterables = [n.iter for n in descendants(node) if isinstance(n, (cst.For, cst.CompFor))]
    in_loops = sum(count(iterable) for iterable in iterables)
    return in_loops > 0 and count(node) == in_loops + 1


def _iterated_directly(index: ScriptIndex, call: CallSite, iterables: set[int]) -> bool:
    """`for batch in DataLoader(...)` / `enumerate(DataLoader(...))` in a step loop."""
    stmt = call.place.stmt
    return isinstance(stmt, cst.For) and id(stmt.iter) in iterables and contains(stmt.iter, lambda n: n is call.node)


def untraced_source(index: ScriptIndex, training_names: set[str]) -> Binding | None:
    """The binding that makes what the step loop iterates, when it is not a DataLoader of this file
    (another module's loader, a torchtext iterator): then that, not a guess, feeds training."""
    loaders = {id(c.node) for c in data_loader_calls(index)}
    for binding in index.bindings:
        value = binding.value if binding.value is not None else binding.node.value  # `a, b = make()`
        if binding.target not in training_names or not isinstance(value, cst.Call):
            continue
        qualified = index.qualify(value.func) or ""
        if qualified in ITERATOR_WRAPPERS or qualified in BUILTIN_NAMES or id(value) in loaders:
            continue
        helper = index.functions.get(spell(value.func) or "")
        if helper is not None and (_yields_from_first_parameter(helper) or _returns_loader(index, helper, loaders)):
            continue
        return binding
    return None


def _returns_loader(index: ScriptIndex, helper: Scope, loaders: set[int]) -> bool:
    return any(id(c.node) in loaders for c in index.calls_from(helper))


def _bound_names(index: ScriptIndex, call: CallSite) -> list[str]:
    """Names the loader is bound to: directly, or through a helper of this file that returns it
    (the call itself, or the name it is bound to; one element of a returned tuple)."""
    direct = index.targets_of(call.node)
    if call.place.scope.is_module:
        return direct
    returned: cst.BaseExpression | None = call.node if _returns(call.place.stmt, call.node) else None
    if returned is None and direct:
        returned = _returned_name(index, call.place.scope, direct[0])
    if returned is None:
        return direct
    return direct + [n for n in _caller_bindings(index, call.place.scope, returned) if n not in direct]


def loader_names(index: ScriptIndex, call: CallSite) -> list[str]:
    """Every name a DataLoader call is bound to (through a helper that returns it, too)."""
    return _bound_names(index, call)


def _returns(stmt: cst.BaseStatement, value: cst.BaseExpression) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(s, cst.Return) and s.value is value for s in stmt.body
    )


def _returned_name(index: ScriptIndex, scope: Scope, name: str) -> cst.BaseExpression | None:
    """In the helper, the node of `name` in `return name` / `return a, name`."""
    for node in index.returns_under(scope.node):
        if node.value is not None:
            if spell(node.value) == name:
                return node.value
            if isinstance(node.value, cst.Tuple):
                for element in node.value.elements:
                    if spell(element.value) == name:
                        return element.value
    return None


def _caller_bindings(index: ScriptIndex, helper: Scope, returned: cst.BaseExpression) -> list[str]:
    """`train_loader = make_loader(...)`, or `train_loader, val_loader = make_loaders(...)` taking
    the element the helper returns the loader in."""
    position = None
    for node in index.returns_under(helper.node):
        if isinstance(node.value, cst.Tuple):
            for i, element in enumerate(node.value.elements):
                if element.value is returned:
                    position = i
    names: list[str] = []
    for binding in index.derived("bindings_by_called", lambda: _bindings_by_called(index)).get(helper.name, ()):
        assign = binding.node
        assert isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call)
        target = assign.targets[0].target
        if position is None and binding.value is assign.value:
            names.append(binding.target)
        elif position is not None and isinstance(target, (cst.Tuple, cst.List)) and position < len(target.elements):
            spelled = spell(target.elements[position].value)
            if spelled == binding.target and spelled not in names:
                names.append(spelled)
    return names


def _bindings_by_called(index: ScriptIndex) -> dict[str, list[Binding]]:
    """`x = f(...)` (any target): the spelling of what is called -> its bindings, in source order."""
    by_called: dict[str, list[Binding]] = {}
    for binding in index.bindings:
        node = binding.node
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
            called = spell(node.value.func)
            if called is not None:
                by_called.setdefault(called, []).append(binding)
    return by_called


def _shuffles(call: CallSite) -> bool:
    for arg in call.node.args:
        if arg.keyword is not None and arg.keyword.value == "shuffle":
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
    return False


def find_epoch_loops(index: ScriptIndex, loops: list[Loop]) -> list[EpochLoop]:
    """The `for epoch in ...` around each step loop, in its own scope or in a caller's."""
    found: list[EpochLoop] = []
    for step in loops:
        loader = loader_spelling(index, step)
        if loader is None:
            continue
        epoch = _outer_epoch_loop(index, step)
        if epoch is not None:
            found.append(EpochLoop(loop=epoch, loader=loader))
            continue
        found.extend(_epoch_loops_in_callers(index, step.place.scope, loader))
    unique: dict[int, EpochLoop] = {}
    for item in found:
        unique.setdefault(id(item.loop.node), item)
    return list(unique.values())


def _outer_epoch_loop(index: ScriptIndex, step: Loop) -> Loop | None:
    for outer in reversed(step.place.loops):
        loop = index.loop_of(outer)
        if loop is not None and loop.target is not None:
            return loop
    return None


# A search of one function's callers: yields (caller, loader as the caller sees it) for each caller
# to search in turn, is sent back what that search found, and returns what it found itself.
CallerSearch = Generator[tuple[Scope, str], list[EpochLoop], list[EpochLoop]]


def _epoch_loops_in_callers(index: ScriptIndex, scope: Scope, loader: str) -> list[EpochLoop]:
    """The epoch loops around the calls of `scope`, going up through callers that call it outside
    any loop. Each search runs as a generator on an explicit stack, not by recursion: a chain of
    callers can be thousands deep. A caller already being searched (recursion in the script)
    finds nothing a second time."""
    searches: list[CallerSearch] = [_search_callers(index, scope, loader)]
    active = [(scope, loader)]
    answer: list[EpochLoop] | None = None
    while searches:
        try:
            request = searches[-1].send(answer)  # type: ignore[arg-type]  # a generator's first send must be None, which its answers' type leaves out
        except StopIteration as finished:
            searches.pop()
            active.pop()
            answer = finished.value
            continue
        if any(request[0] is s and request[1] == l for s, l in active):
            answer = []
            continue
        searches.append(_search_callers(index, *request))
        active.append(request)
        answer = None
    return answer or []


def _search_callers(index: ScriptIndex, scope: Scope, loader: str) -> CallerSearch:
    found: list[EpochLoop] = []
    for call in callers_of(index, scope):
        if not call.place.loops:
            continue
        loop = index.loop_of(call.place.loops[-1])
        seen_as = _as_seen_by_caller(index, scope, loader, call)
        if seen_as is None:
            continue
        if loop is not None and loop.target is not None:
            found.append(EpochLoop(loop=loop, loader=seen_as))
        else:
            found.extend((yield (call.place.scope, seen_as)))
    if not found and not scope.is_module:
        for call in callers_of(index, scope):
            if not call.place.loops:
                seen_as = _as_seen_by_caller(index, scope, loader, call)
                if seen_as is not None:
                    found.extend((yield (call.place.scope, seen_as)))
    return found


def _as_seen_by_caller(index: ScriptIndex, scope: Scope, loader: str, call: CallSite) -> str | None:
    if loader.startswith("self."):
        return loader if call.place.scope.class_name == scope.class_name else None
    if loader in scope.params:
        for spelled, _scope, site in caller_arguments(index, scope, loader):
            if site is call:
                return spelled
        return None
    return loader if loader in index.names_under(call.place.scope.node) else None


# -- batches drawn from a global random generator in the training loop --------------------------
# the draws that pick batches (or shuffle indices), by the generator they read
RANDOM_DRAWS = {
    "torch": ("torch.randint", "torch.randperm", "torch.multinomial"),
    "numpy": ("numpy.random.randint", "numpy.random.choice", "numpy.random.permutation", "numpy.random.shuffle",
              "numpy.random.random_integers"),
    "random": ("random.randint", "random.randrange", "random.choice", "random.choices", "random.sample", "random.shuffle"),
}
SEEDERS = {
    "torch": ("torch.manual_seed", "torch.random.manual_seed"),
    "numpy": ("numpy.random.seed",),
    "random": ("random.seed",),
}


@dataclass(frozen=True)
class SeedSource:
    """A statement that seeds global generators: `torch.manual_seed(args.seed)`, or a call of the
    script's own helper that does (`set_seed(args.seed)`, seeding what its body seeds)."""

    call: CallSite
    generators: frozenset[str]  # "torch", "numpy", "random"


def random_draws(index: ScriptIndex, loop: Loop) -> dict[str, CallSite]:
    """The first draw from each global generator in the step loop: in its body, or in a function of
    this file the body calls (`get_batch()`). A draw given its own `generator=` reads no global one."""
    inside = calls_in_loop(index, loop.node)
    candidates = list(inside)
    for callee in {c for c in (callee_scope(index, call) for call in inside) if c}:
        candidates.extend(index.calls_from(callee))
    found: dict[str, CallSite] = {}
    for call in sorted(candidates, key=index.call_position):
        kind = _generator_of(index.qualify(call.node.func) or "", RANDOM_DRAWS)
        if kind is not None and not any(a.keyword is not None and a.keyword.value == "generator" for a in call.node.args):
            found.setdefault(kind, call)
    return found


def _generator_of(qualified: str, table: dict[str, tuple[str, ...]]) -> str | None:
    return next((kind for kind, names in table.items() if qualified in names), None)


def seed_sources(index: ScriptIndex) -> list[SeedSource]:
    """Every seeding of a global generator, in source order: the direct calls outside the script's
    helpers, and the calls of a helper whose body seeds from its first parameter."""
    helpers: dict[Scope, set[str]] = {}
    sources: list[SeedSource] = []
    for call in index.calls:
        kind = _generator_of(index.qualify(call.node.func) or "", SEEDERS)
        if kind is None or not call.node.args:
            continue
        scope = call.place.scope
        seed = spell(call.node.args[0].value)
        if not scope.is_module and scope.params and seed == scope.params[0] and scope.class_name is None:
            helpers.setdefault(scope, set()).add(kind)
        else:
            sources.append(SeedSource(call=call, generators=frozenset({kind})))
    for helper, kinds in helpers.items():
        sources.extend(SeedSource(call=c, generators=frozenset(kinds)) for c in callers_of(index, helper) if c.node.args)
    return sorted(sources, key=lambda s: index.call_position(s.call))


# -- a DataLoader's own sampler drawing with replacement from a seeded generator ---------------------
# sampler class -> (position of `replacement`, its default, position of `generator`)
SAMPLERS_WITH_REPLACEMENT = {
    "torch.utils.data.RandomSampler": (1, False, 3),
    "torch.utils.data.sampler.RandomSampler": (1, False, 3),
    "torch.utils.data.WeightedRandomSampler": (2, True, 3),
    "torch.utils.data.sampler.WeightedRandomSampler": (2, True, 3),
}


@dataclass(frozen=True)
class SeededSampler:
    """`DataLoader(ds, sampler=RandomSampler(ds, replacement=True, generator=g))` after `g.manual_seed(s)`
    (or `generator=torch.Generator().manual_seed(s)`): every rank would draw the same indices."""

    sampler: cst.Call
    seeding: CallSite  # `g.manual_seed(s)`
    seed: cst.BaseExpression  # `s`


def seeded_sampler(index: ScriptIndex, loader: CallSite) -> SeededSampler | None:
    """The loader's sampler, when it draws with replacement from a generator of its own seeded in this file."""
    given = _argument(loader.node, "sampler", 3)
    sampler = _made_by(index, given, loader.place.scope) if given is not None else None
    if sampler is None:
        return None
    replacement_at, default, generator_at = SAMPLERS_WITH_REPLACEMENT[index.qualify(sampler.func) or ""]
    replacement = _argument(sampler, "replacement", replacement_at)
    with_replacement = default if replacement is None else isinstance(replacement, cst.Name) and replacement.value == "True"
    generator = _argument(sampler, "generator", generator_at)
    if not with_replacement or generator is None:
        return None
    seeding = _generator_seeding(index, generator, loader.place.scope)
    if seeding is None or not seeding.node.args:
        return None
    return SeededSampler(sampler=sampler, seeding=seeding, seed=seeding.node.args[0].value)


def _argument(call: cst.Call, keyword: str, position: int) -> cst.BaseExpression | None:
    positional = [a for a in call.args if a.keyword is None and not a.star]
    found = next((a for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
    found = found or (positional[position] if position < len(positional) else None)
    return found.value if found is not None else None


def _made_by(index: ScriptIndex, value: cst.BaseExpression, scope: Scope) -> cst.Call | None:
    """The sampler call itself, or the one the name is bound to (last, in this scope or the module's)."""
    if not isinstance(value, cst.Call):
        name = spell(value)
        bindings = (index.bindings_of_in(name, scope) or index.module_bindings_of(name)) if name else []
        value = bindings[-1].value if bindings and bindings[-1].value is not None else value
    if isinstance(value, cst.Call) and (index.qualify(value.func) or "") in SAMPLERS_WITH_REPLACEMENT:
        return value
    return None


def _generator_seeding(index: ScriptIndex, generator: cst.BaseExpression, scope: Scope) -> CallSite | None:
    """`torch.Generator().manual_seed(s)` in place or bound to the name, else the last `g.manual_seed(s)`."""
    name = spell(generator)
    if name is not None and not isinstance(generator, cst.Call):
        bindings = index.bindings_of_in(name, scope) or index.module_bindings_of(name)
        generator = bindings[-1].value if bindings and bindings[-1].value is not None else generator
    if isinstance(generator, cst.Call) and _seeds_new_generator(index, generator):
        return index.call_site(generator)
    seedings = [c for c in index.calls if isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == "manual_seed"
                and name is not None and spell(c.node.func.value) == name
                and (c.place.scope is scope or c.place.scope.is_module)]
    return seedings[-1] if seedings else None


def _seeds_new_generator(index: ScriptIndex, call: cst.Call) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value == "manual_seed" and isinstance(func.value, cst.Call) \
        and (index.qualify(func.value.func) or "") == "torch.Generator"


LoaderRead = tuple[str, Scope]  # a loader's name, and the scope that reads it


def loader_reads(index: ScriptIndex, loops: list[Loop]) -> set[LoaderRead]:
    """What each step loop iterates, in the loop's scope, and what every caller passes for it when it
    is a parameter (a few calls up)."""
    pending = [(name, loop.place.scope) for loop in loops if (name := loader_spelling(index, loop))]
    reads: set[LoaderRead] = set()
    while pending and len(reads) < 64:
        read = pending.pop()
        if read not in reads:
            reads.add(read)
            pending += [(spelled, scope) for spelled, scope, _call in caller_arguments(index, read[1], read[0])]
    return reads


def bound_where_read(index: ScriptIndex, call: CallSite, reads: set[LoaderRead]) -> bool:
    """Whether a name the loader is bound to is read as a loader in the scope that binds it, or, bound
    at module level, in a function that binds no such name itself; `self.x` in a method of its class."""
    direct = index.targets_of(call.node)
    for name in loader_names(index, call):
        scopes = {call.place.scope} if name in direct else {b.place.scope for b in index.bindings_of(name)}
        for read_name, scope in reads:
            if read_name != name:
                continue
            global_read = name not in scope.params and not index.bindings_of_in(name, scope)
            if scope in scopes or (global_read and any(s.is_module for s in scopes)):
                return True
            if name.startswith("self.") and any(s.class_name == scope.class_name for s in scopes):
                return True
    return False
