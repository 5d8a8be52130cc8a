"""What is typed right after the key that opens a text field goes into that field (screens/base.py,
rule 7). The keys of one act (joined by +) arrive with no pause, as fast typing on a busy machine
delivers them: before, they went to the screen under the new one and were lost (issue 36, item 8:
the prompt ran as "The" instead of "ROMEO:")."""

from __future__ import annotations

from textual.widgets import Input

from gpt2viz.i18n import language, set_language
from gpt2viz.tui.app import make_app
from gpt2viz.tui.screens.generation import GenerationScreen
from gpt2viz.tui.screens.generation_settings import SettingsScreen
from gpt2viz.tui.screens.prompt import PromptScreen
from monkey import replay, until_ended
from tui_helpers import run_async, started


@run_async
async def test_a_prompt_typed_as_the_editor_opens_is_the_prompt_run(ckpts):
    app = make_app(lm=ckpts.lm("tiny"))
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, "e+R+O+M+E+O")
        assert isinstance(app.screen, PromptScreen) and app.screen.query_one(Input).value == "ROMEO"
        await replay(app, pilot, ":+enter")
        await started(app, pilot)
        assert app.session.trace.prompt == "ROMEO:"


@run_async
async def test_a_setting_typed_as_the_form_opens_goes_into_its_first_field(ckpts):
    app = make_app(lm=ckpts.lm("tiny"))
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, "g")
        await started(app, pilot, GenerationScreen)  # the form opens from the generation view
        await replay(app, pilot, "s+5+0")
        assert isinstance(app.screen, SettingsScreen) and app.screen.query_one("#new-tokens", Input).value == "50"
        await replay(app, pilot, "escape")
        await started(app, pilot, GenerationScreen)
        try:  # the form's own keys, before its fields, work as fast: L switches the language
            await replay(app, pilot, "s+L")
            assert isinstance(app.screen, SettingsScreen) and language() == "zh"
        finally:
            set_language("en")
        await replay(app, pilot, "escape")
        await started(app, pilot, GenerationScreen)
        await replay(app, pilot, "s+q")  # and q quits
        await until_ended(app)
        assert app.return_code == 0
