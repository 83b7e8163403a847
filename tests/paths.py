"""Where the tests find things, wherever under tests/ a test file lives (docs/DEVELOPING.md,
"Tests"): the repository root, the shared fixtures folder, and ../shared/reference beside
the checkout."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
SHARED_REFERENCE = REPO.parent / "shared" / "reference"
