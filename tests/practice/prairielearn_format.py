"""PrairieLearn's file formats as JSON Schemas, written for these tests from PrairieLearn's
documentation (the info*.json references and the element pages): the fields and attributes a
course may use, their types and allowed values, and which are required. Not PrairieLearn's own
schema files: those are not copied into this project. What they reject that matters here: a
missing required field, an unknown field or attribute (a typo PrairieLearn would refuse to sync),
a value outside an enumeration, a malformed uuid or colour.
"""

from __future__ import annotations

from typing import Any

_UUID = {"type": "string", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"}
_COLOR = {"type": "string", "pattern": "^(red|pink|purple|blue|turquoise|green|yellow|orange|brown|gray)[1-3]$"}
_STRINGS = {"type": "array", "items": {"type": "string"}}


def _object(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties, "additionalProperties": False}


QUESTION = _object(
    ["uuid", "type", "title", "topic"],
    {
        "uuid": _UUID,
        "type": {"enum": ["Calculation", "MultipleChoice", "Checkbox", "File", "MultipleTrueFalse", "v3"]},
        "title": {"type": "string"},
        "topic": {"type": "string"},
        "tags": _STRINGS,
        "clientFiles": _STRINGS,
        "clientTemplates": _STRINGS,
        "template": {"type": "string"},
        "gradingMethod": {"enum": ["Internal", "External", "Manual"]},
        "singleVariant": {"type": "boolean"},
        "showCorrectAnswer": {"type": "boolean"},
        "partialCredit": {"type": "boolean"},
        "options": {"type": "object"},
        "externalGradingOptions": {"type": "object"},
        "dependencies": {"type": "object"},
        "workspaceOptions": {"type": "object"},
        "comment": {},
    },
)

_ZONE_QUESTION = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "alternatives": {"type": "array", "items": {"type": "object", "required": ["id"]}},
        "numberChoose": {"type": "integer", "minimum": 0},
        "autoPoints": {"oneOf": [{"type": "number", "minimum": 0}, {"type": "array", "items": {"type": "number"}}]},
        "maxAutoPoints": {"type": "number", "minimum": 0},
        "manualPoints": {"type": "number", "minimum": 0},
        "points": {"oneOf": [{"type": "number", "minimum": 0}, {"type": "array", "items": {"type": "number"}}]},
        "maxPoints": {"type": "number", "minimum": 0},
        "triesPerVariant": {"type": "integer", "minimum": 1},
        "comment": {},
    },
    "oneOf": [{"required": ["id"]}, {"required": ["alternatives"]}],
    "additionalProperties": False,
}

ASSESSMENT = _object(
    ["uuid", "type", "title", "set", "number"],
    {
        "uuid": _UUID,
        "type": {"enum": ["Homework", "Exam"]},
        "title": {"type": "string"},
        "set": {"type": "string"},
        "number": {"type": "string"},
        "text": {"type": "string"},
        "allowAccess": {"type": "array", "items": {"type": "object"}},
        "multipleInstance": {"type": "boolean"},
        "shuffleQuestions": {"type": "boolean"},
        "allowIssueReporting": {"type": "boolean"},
        "maxPoints": {"type": "number"},
        "maxBonusPoints": {"type": "number"},
        "constantQuestionValue": {"type": "boolean"},
        "zones": {
            "type": "array",
            "items": _object(
                ["questions"],
                {
                    "title": {"type": "string"},
                    "numberChoose": {"type": "integer", "minimum": 0},
                    "maxPoints": {"type": "number"},
                    "bestQuestions": {"type": "integer", "minimum": 0},
                    "questions": {"type": "array", "minItems": 1, "items": _ZONE_QUESTION},
                    "comment": {},
                },
            ),
        },
        "comment": {},
    },
)

COURSE_INSTANCE = _object(
    ["uuid", "longName"],
    {
        "uuid": _UUID,
        "longName": {"type": "string"},
        "shortName": {"type": "string"},
        "timezone": {"type": "string"},
        "allowAccess": {"type": "array", "items": {"type": "object"}},
        "hideInEnrollPage": {"type": "boolean"},
        "groupAssessmentsBy": {"enum": ["Set", "Module"]},
        "comment": {},
    },
)

COURSE = _object(
    ["uuid", "name", "title", "topics"],
    {
        "uuid": _UUID,
        "name": {"type": "string"},
        "title": {"type": "string"},
        "timezone": {"type": "string"},
        "options": {"type": "object"},
        "assessmentSets": {
            "type": "array",
            "items": _object(
                ["name", "abbreviation", "heading", "color"],
                {
                    "name": {"type": "string"},
                    "abbreviation": {"type": "string"},
                    "heading": {"type": "string"},
                    "color": _COLOR,
                },
            ),
        },
        "topics": {
            "type": "array",
            "items": _object(
                ["name", "color"],
                {"name": {"type": "string"}, "color": _COLOR, "description": {"type": "string"}},
            ),
        },
        "tags": {
            "type": "array",
            "items": _object(
                ["name", "color"],
                {"name": {"type": "string"}, "color": _COLOR, "description": {"type": "string"}},
            ),
        },
        "comment": {},
    },
)

_BOOL = {"type": "string", "enum": ["true", "t", "1", "false", "f", "0", "True", "False"]}
_NUMBER = {"type": "string", "pattern": r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$"}
_INTEGER = {"type": "string", "pattern": r"^[-+]?\d+$"}
_TEXT = {"type": "string"}

ELEMENTS = {
    "pl-number-input": _object(
        ["answers-name"],
        {
            "answers-name": _TEXT,
            "weight": _INTEGER,
            "correct-answer": _NUMBER,
            "label": _TEXT,
            "aria-label": _TEXT,
            "suffix": _TEXT,
            "display": {"enum": ["block", "inline"]},
            "comparison": {"enum": ["relabs", "sigfig", "decdig"]},
            "rtol": _NUMBER,
            "atol": _NUMBER,
            "digits": _INTEGER,
            "allow-complex": _BOOL,
            "allow-blank": _BOOL,
            "blank-value": _TEXT,
            "show-help-text": _BOOL,
            "show-placeholder": _BOOL,
            "size": _INTEGER,
            "show-correct-answer": _BOOL,
            "show-score": _BOOL,
            "allow-fractions": _BOOL,
            "custom-format": _TEXT,
            "placeholder": _TEXT,
        },
    ),
    "pl-multiple-choice": _object(
        ["answers-name"],
        {
            "answers-name": _TEXT,
            "weight": _INTEGER,
            "display": {"enum": ["block", "inline", "dropdown"]},
            "number-answers": _INTEGER,
            "fixed-order": _BOOL,
            "order": {"enum": ["random", "ascend", "descend", "fixed"]},
            "inline": _BOOL,
            "hide-letter-keys": _BOOL,
            "hide-answer-panel": _BOOL,
            "hide-help-text": _BOOL,
            "hide-score-badge": _BOOL,
            "allow-blank": _BOOL,
            "size": _INTEGER,
            "placeholder": _TEXT,
            "aria-label": _TEXT,
        },
    ),
    "pl-answer": _object(
        [],
        {"correct": _BOOL, "feedback": _TEXT, "score": _NUMBER},
    ),
}
