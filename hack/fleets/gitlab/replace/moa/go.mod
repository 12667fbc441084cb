module gitlab.com/gitlab-org/moa

go 1.24
