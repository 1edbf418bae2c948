"""The course: questions and how answers are read, the lessons' helpers, the explorers, the build and the site.

    quiz      question kinds, checking, feedback, hints, the answer box
    answers   reading a learner's answer: numbers with units, formulas, choices
    show      typeset a sympy formula in a notebook
    explore   the interactive explorers (widgets over the models and the figures)
    build     lessons/*.md -> notebooks/ and solutions/
    site      the course as static HTML
    bank      the question bank: one module per lesson (a graded kernel's roofkit holds none of it)

Importing this package imports none of them; :func:`roofkit.course.quiz.get`
loads the bank when a question is first asked for (docs/architecture.md).
"""
