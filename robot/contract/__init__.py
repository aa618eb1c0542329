"""The RoboScript contract: what code generation, evaluation and the runners all agree on.

The world model (``world``, ``catalog``, ``geometry``), the tool API generated code is written against
(``tool_api``), the check every snippet passes before it runs (``code_policy``, ``code_checks``), the evaluation
items checked on a world state (``items``) and the settings a goal carries to a runner (``params``). It imports
nothing of the runner side and nothing of ``tasks``: both of those import it.
"""
