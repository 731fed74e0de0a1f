// Tests of orders and layouts count how often each slot was visited; a
// correct one visits every slot exactly once.
#pragma once
#include <vector>

struct VisitCounts {
    int missing = 0;   // slots never visited
    int repeated = 0;  // slots visited more than once
};

inline VisitCounts visit_counts(const std::vector<int> &counts) {
    VisitCounts v;
    for (int n : counts) {
        v.missing += n == 0;
        v.repeated += n > 1;
    }
    return v;
}
