"""RLDS field names, in one place. Values match rlds.rlds_types (checked by tests/test_fields.py)."""

STEPS = 'steps'
OBSERVATION = 'observation'
ACTION = 'action'
REWARD = 'reward'
DISCOUNT = 'discount'
IS_FIRST = 'is_first'
IS_LAST = 'is_last'
IS_TERMINAL = 'is_terminal'

BOUNDARY_FIELDS = (IS_FIRST, IS_LAST, IS_TERMINAL)
CORE_STEP_FIELDS = (OBSERVATION, ACTION, REWARD, DISCOUNT) + BOUNDARY_FIELDS

# Step mask of formats that did not keep the final observation (rlds_suite.core.episodes): True on
# the placeholder last step, whose observation repeats the last real one.
OBSERVATION_IS_COPY = 'observation_is_copy'

# Transition view (rlds_suite.core.episodes.to_transitions, streams).
NEXT_OBSERVATION = 'next_observation'
TRANSITION_FIELDS = (OBSERVATION, ACTION, REWARD, DISCOUNT, NEXT_OBSERVATION, IS_TERMINAL)
