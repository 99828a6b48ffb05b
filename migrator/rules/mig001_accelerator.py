"""MIG001 accelerator: `from runtime import Accelerator` (or `accelerate` with --target
accelerate) and one `accelerator = Accelerator()` where every rewritten line can see it: the
first statement of the function that owns training, or module level after the imports when
several functions (or module-level code) use it."""

from __future__ import annotations

from migrator.analysis.placement import after_imports, is_docstring
from migrator.rules.base import Rule, RuleContext


class CreateAccelerator(Rule):
    code = "MIG001"
    name = "accelerator"
    summary = "import Accelerator and create `accelerator = Accelerator()` where training lives"
    triggers = ("backward",)

    def apply(self, context: RuleContext) -> None:
        facts = context.facts
        if facts.accelerator_names or not context.needs:
            return
        owner = facts.owner
        module_body = facts.index.module_scope.body
        inside_owner = owner is not None and owner.kind == "function" and all(
            need.scope is owner or need.scope in owner.descendants() for need in context.needs
        )
        code = f"{context.accelerator} = Accelerator()\n"
        if inside_owner:
            body = owner.body
            index = 1 if body.statements and is_docstring(body.statements[0]) else 0
            statement = context.statement(code, blank_line_before=False)
            context.edits.insert(body.holder, index, statement, priority=0)
        else:
            module_needs = []
            for need in context.needs:
                if need.block is module_body:
                    module_needs.append(need.index)
                elif need.scope.kind == "module" and need.block.parent is not None:
                    module_needs.append(need.block.parent.chain()[0].index)
            limit = min(module_needs, default=len(module_body.statements))
            index = after_imports(module_body, limit)
            statement = context.statement(code, blank_line_before=index > 0)
            context.edits.insert(module_body.holder, index, statement, priority=0)
        context.accelerator_created = True
