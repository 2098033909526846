#pragma once
// A fixture for the layers.* tests (never compiled).
