module gitlab.com/gitlab-org/fleeting/taskscaler

go 1.24
